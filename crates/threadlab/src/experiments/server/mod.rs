//! `server`: the PThreads study's client/server model (section 5, Figs. 4 and 5) measured
//! again, beside the designs that came after it.

pub mod client;
