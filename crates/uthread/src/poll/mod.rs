//! The reactor's lower layers, below the runtime: the kernel side (`poller`: one epoll instance
//! per carrier, its eventfd, `poll(2)` outside a runtime) and the poll descriptors (`desc`: what
//! a descriptor shares between the green threads waiting on it, the pollers reporting it and
//! whoever shuts it down). The waits users call are above the runtime, in `crate::io` and
//! `crate::net`.

pub(crate) mod desc;
pub(crate) mod poller;
