//! A fresh measuring thread for one trial.
//!
//! Where the kernel places threads, it decides from their history: wake-affine placement looks
//! at how often the waker has woken others and where, load balancing at each thread's recent
//! load. A measuring thread that lives for the whole experiment carries that history from one
//! trial to the next, so every trial of an unpinned hand-off settled into the same regime (a
//! futex hand-off read 2.1 us in every trial of one run and 16.7 us in every trial of the
//! next). A `Driver` is a new thread per trial, placed as asked, that runs the trial's batches
//! sent to it; it ends when dropped.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::measure::placement::place_current_thread;
use crate::measure::spawn::spawn;

type Job = Box<dyn FnOnce() + Send>;

pub struct Driver {
    jobs: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
}

impl Driver {
    /// Starts a thread allowed on `cpus` (every CPU of the process: the kernel places it).
    pub fn start(cpus: &[usize]) -> Result<Driver> {
        let (jobs, rx): (Sender<Job>, Receiver<Job>) = channel();
        let (placed_tx, placed_rx) = channel::<Result<()>>();
        let cpus = cpus.to_vec();
        let handle = spawn("a measuring thread", move || {
            let placed = place_current_thread(&cpus);
            let ok = placed.is_ok();
            let _ = placed_tx.send(placed);
            if ok {
                for job in rx {
                    job();
                }
            }
        })?;
        let d = Driver {
            jobs: Some(jobs),
            handle: Some(handle),
        };
        placed_rx
            .recv()
            .map_err(|_| Error::Fail("the measuring thread ended before it was placed".into()))??;
        Ok(d)
    }

    /// Runs `job` on the driver's thread and returns what it returned.
    pub fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        self.run_watching(job, || {})
    }

    /// As `run`, calling `watch` every 10 ms while the job runs (to tell it to stop early when
    /// the run is interrupted, for a job that only reads its own flags).
    pub fn run_watching<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
        watch: impl Fn(),
    ) -> Result<T> {
        let (tx, rx) = channel();
        let send = self.jobs.as_ref().map(|jobs| {
            jobs.send(Box::new(move || {
                let _ = tx.send(job());
            }))
        });
        if !matches!(send, Some(Ok(()))) {
            return Err(Error::Fail("the measuring thread is gone".into()));
        }
        loop {
            match rx.recv_timeout(std::time::Duration::from_millis(10)) {
                Ok(v) => return Ok(v),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => watch(),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::Fail("the measuring thread panicked".into()))
                }
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop once its current job returns.
        drop(self.jobs.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_one_fresh_thread_per_driver() {
        let here = crate::sys::gettid();
        let cpus = crate::measure::placement::allowed_cpus();
        let d = Driver::start(&cpus).unwrap();
        let a = d.run(crate::sys::gettid).unwrap();
        let b = d.run(crate::sys::gettid).unwrap();
        assert_eq!(a, b, "one thread for the driver's life");
        assert_ne!(a, here);
        drop(d);
        let e = Driver::start(&cpus).unwrap();
        assert_ne!(
            e.run(crate::sys::gettid).unwrap(),
            a,
            "a new driver, a new thread"
        );
    }

    #[test]
    fn a_job_runs_where_the_driver_was_placed() {
        let cpu = crate::measure::placement::home_cpu();
        let d = Driver::start(&[cpu]).unwrap();
        let seen = d.run(crate::measure::placement::allowed_cpus).unwrap();
        assert_eq!(seen, vec![cpu]);
    }
}
