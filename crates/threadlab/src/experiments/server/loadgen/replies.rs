//! Requests out and replies in: writing a request, reading and verifying a reply, and what became of it.

use super::*;

impl<'p> Generator<'p> {
    /// Sends the next request on an idle connection.
    pub(super) fn send(&mut self, ci: usize, planned_ns: u64, plan: &Plan) {
        let now = mono_ns();
        let c = &mut self.conns[ci];
        c.seq = c.seq.wrapping_add(1);
        let mut r = Request::echo(c.seq, plan.payload, c.tag);
        (r.work_spin_us, r.work_block_us) = plan.work;
        c.hdr = encode_request(&r);
        c.planned_ns = planned_ns;
        c.sent_ns = now;
        c.out_done = 0;
        c.in_got = 0;
        c.reply_len = 0;
        c.st = St::Sending;
        self.write_some(ci, plan);
    }

    pub(super) fn write_some(&mut self, ci: usize, plan: &Plan) {
        let len = plan.payload as usize;
        let c = &mut self.conns[ci];
        let off = pattern_offset(c.tag, c.seq);
        let payload = &self.pattern[off..off + len];
        let total = REQUEST_HEADER + len;
        let mut failed = false;
        while c.out_done < total {
            let (a, b): (&[u8], &[u8]) = if c.out_done < REQUEST_HEADER {
                (&c.hdr[c.out_done..], payload)
            } else {
                (&payload[c.out_done - REQUEST_HEADER..], &[])
            };
            let iov = [
                libc::iovec {
                    iov_base: a.as_ptr() as *mut libc::c_void,
                    iov_len: a.len(),
                },
                libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                },
            ];
            // SAFETY: both iovecs point into live buffers of the given lengths.
            let n = unsafe { libc::writev(c.fd, iov.as_ptr(), 2) };
            if n > 0 {
                c.out_done += n as usize;
                continue;
            }
            let e = crate::subjects::server::net::errno();
            if n < 0 && e == libc::EAGAIN {
                // Wait for room: the rare partial write of a large request.
                self.ep.ctl(
                    libc::EPOLL_CTL_MOD,
                    c.fd,
                    (libc::EPOLLIN | libc::EPOLLOUT) as u32,
                    ci as u64,
                );
                return;
            }
            if n < 0 && e == libc::EINTR {
                continue;
            }
            failed = true;
            break;
        }
        if failed {
            self.kill(ci, Some(Failure::Reset));
        } else if c.st == St::Sending {
            c.st = St::Receiving;
        }
    }

    /// Handles readiness of connection `ci`; `done` receives the reply's timing when one
    /// completes.
    pub(super) fn on_event(&mut self, ci: usize, flags: u32, plan: &Plan, done: &mut Option<Done>) {
        let st = self.conns[ci].st;
        if st == St::Sending && flags & libc::EPOLLOUT as u32 != 0 {
            self.write_some(ci, plan);
            if self.conns[ci].st == St::Receiving {
                self.ep.ctl(
                    libc::EPOLL_CTL_MOD,
                    self.conns[ci].fd,
                    libc::EPOLLIN as u32,
                    ci as u64,
                );
            }
        }
        let st = self.conns[ci].st;
        if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
            return;
        }
        match st {
            St::Receiving | St::Sending => self.read_reply(ci, plan, done),
            St::Idle => {
                // Nothing is expected: EOF (the server closed an idle connection) or garbage.
                let mut b = [0u8; 64];
                // SAFETY: reads into a valid local buffer.
                let n = unsafe { libc::recv(self.conns[ci].fd, b.as_mut_ptr().cast(), 64, 0) };
                if n == 0 {
                    let refused = self.conns[ci].refused_last;
                    self.kill(ci, (!refused).then_some(Failure::Reset));
                } else if n > 0 {
                    self.kill(ci, Some(Failure::Verify("bytes nobody asked for".into())));
                }
            }
            St::Connecting | St::Dead => {}
        }
    }

    pub(super) fn read_reply(&mut self, ci: usize, plan: &Plan, done: &mut Option<Done>) {
        let expect = plan.payload as usize;
        loop {
            let c = &self.conns[ci];
            let want = if c.in_got < RESPONSE_HEADER {
                RESPONSE_HEADER + expect - c.in_got
            } else {
                RESPONSE_HEADER + c.reply_len - c.in_got
            };
            let want = want.min(self.scratch.len());
            // SAFETY: scratch is valid for `want` bytes.
            let n = unsafe { libc::recv(c.fd, self.scratch.as_mut_ptr().cast(), want, 0) };
            if n < 0 {
                let e = crate::subjects::server::net::errno();
                if e == libc::EAGAIN || e == libc::EINTR {
                    return;
                }
                self.kill(ci, Some(Failure::Reset));
                return;
            }
            if n == 0 {
                self.kill(ci, Some(Failure::Reset));
                return;
            }
            let n = n as usize;
            if let Err(f) = self.take_bytes(ci, n, plan) {
                self.kill(ci, Some(f));
                return;
            }
            let c = &self.conns[ci];
            if c.in_got >= RESPONSE_HEADER && c.in_got == RESPONSE_HEADER + c.reply_len {
                self.complete(ci, done);
                return;
            }
            if n < want {
                return;
            }
        }
    }

    /// Consumes `n` bytes just read into `scratch`: header bytes, then payload checked against
    /// the request's own slice of the pattern.
    pub(super) fn take_bytes(
        &mut self,
        ci: usize,
        n: usize,
        plan: &Plan,
    ) -> std::result::Result<(), Failure> {
        let pattern = self.pattern;
        let c = &mut self.conns[ci];
        let mut at = 0;
        if c.in_got < RESPONSE_HEADER {
            let k = (RESPONSE_HEADER - c.in_got).min(n);
            c.in_hdr[c.in_got..c.in_got + k].copy_from_slice(&self.scratch[..k]);
            c.in_got += k;
            at = k;
            if c.in_got == RESPONSE_HEADER {
                let h = parse_response(&c.in_hdr)
                    .map_err(|_| Failure::Verify("bad magic or kind".into()))?;
                // An error frame with seq and tag 0 refuses the connection itself (a server
                // over its connection cap, or out of descriptors), not this request.
                let refusal = h.kind == KIND_ERROR && h.seq == 0 && h.client_tag == 0;
                if !refusal && (h.seq != c.seq || h.client_tag != c.tag) {
                    return Err(Failure::Verify(format!(
                        "seq {} for {}, tag {:#x} for {:#x}",
                        h.seq, c.seq, h.client_tag, c.tag
                    )));
                }
                c.reply_kind = h.kind;
                match h.kind {
                    KIND_RESPONSE => {
                        if h.payload_len != plan.payload {
                            return Err(Failure::Verify(format!(
                                "length {} for {}",
                                h.payload_len, plan.payload
                            )));
                        }
                        if let Some(d) = self.expect_design {
                            if h.design != d {
                                return Err(Failure::Verify(format!(
                                    "design {} answered, {d} expected",
                                    h.design
                                )));
                            }
                        }
                    }
                    KIND_ERROR if (2..=256).contains(&h.payload_len) => {}
                    _ => return Err(Failure::Verify(format!("reply kind {}", h.kind))),
                }
                c.reply_len = h.payload_len as usize;
                let w = h.worker as usize;
                self.workers_seen[w / 64] |= 1 << (w % 64);
            }
        }
        let body = &self.scratch[at..n];
        if body.is_empty() {
            return Ok(());
        }
        let pos = c.in_got - RESPONSE_HEADER;
        if pos + body.len() > c.reply_len {
            return Err(Failure::Verify("a reply longer than announced".into()));
        }
        if c.reply_kind == KIND_ERROR {
            for (i, &b) in body.iter().enumerate() {
                if pos + i < 2 {
                    c.error_code[pos + i] = b;
                }
            }
        } else {
            let off = pattern_offset(c.tag, c.seq) + pos;
            if body != &pattern[off..off + body.len()] {
                return Err(Failure::Verify(format!(
                    "payload differs from the request near byte {pos}"
                )));
            }
        }
        c.in_got += body.len();
        Ok(())
    }

    pub(super) fn complete(&mut self, ci: usize, done: &mut Option<Done>) {
        let now = mono_ns();
        let c = &mut self.conns[ci];
        let refused = c.reply_kind == KIND_ERROR;
        let code = ErrorCode::from_u16(u16::from_le_bytes(c.error_code));
        c.st = St::Idle;
        let free_since = c.free_since_ns;
        c.free_since_ns = now;
        c.refused_last = refused && code == Some(ErrorCode::Busy);
        let server_ns = u64::from_le_bytes(c.in_hdr[24..32].try_into().expect("8 bytes"));
        *done = Some(Done {
            conn: ci,
            planned_ns: c.planned_ns,
            sent_ns: c.sent_ns,
            ready_ns: free_since.max(c.planned_ns),
            now_ns: now,
            server_ns,
            outcome: match (refused, code) {
                (false, _) => Outcome::Reply,
                (true, Some(ErrorCode::Busy)) => Outcome::Busy,
                (true, _) => Outcome::Error,
            },
        });
    }
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Reply,
    Busy,
    /// An error frame other than BUSY.
    Error,
}

/// A finished transaction's times.
pub(super) struct Done {
    pub(super) conn: usize,
    pub(super) planned_ns: u64,
    pub(super) sent_ns: u64,
    /// When it could have been sent: the later of its planned time and its connection freeing.
    pub(super) ready_ns: u64,
    pub(super) now_ns: u64,
    pub(super) server_ns: u64,
    pub(super) outcome: Outcome,
}
