//! Progress on stderr while a run measures: a bar on a terminal, plain lines otherwise, each
//! with the time the run has left.

use std::io::IsTerminal;
use std::time::Instant;

use crate::results::Status;
use crate::runner::Progress;

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
pub trait Reporter: Progress {
    fn clear(&self);
}

pub fn make_progress() -> Box<dyn Reporter> {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>10} [{bar:20}] {pos}/{len} {elapsed:>4} {msg}",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        );
        Box::new(BarProgress(bar, std::sync::Mutex::new(None)))
    } else {
        Box::new(LineProgress(std::sync::Mutex::new(None)))
    }
}

/// The bar, and when the current experiment started with the run's time left then: the
/// time left shown counts down from it.
struct BarProgress(
    indicatif::ProgressBar,
    std::sync::Mutex<Option<(Instant, f64)>>,
);

impl BarProgress {
    fn left_text(&self) -> String {
        let Some((since, left)) = *self.1.lock().unwrap_or_else(|e| e.into_inner()) else {
            return String::new();
        };
        let secs = (left - since.elapsed().as_secs_f64()).max(0.0);
        format!("~{} left · ", fmt_duration(secs))
    }
}

impl Progress for BarProgress {
    fn experiment(&self, index: usize, total: usize, name: &str) {
        self.0.set_length(total as u64);
        self.0.set_position(index as u64);
        self.0.set_prefix(name.to_string());
    }
    fn step(&self, what: &str) {
        self.0.set_message(format!("{}{what}", self.left_text()));
    }
    fn finished(&self, _name: &str, _status: Status, _wall_s: f64) {
        self.0.inc(1);
    }
    fn time_left(&self, secs: f64) {
        *self.1.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), secs));
        self.0.set_message(self.left_text());
    }
}

/// "45 s", "3 min 20 s".
pub fn fmt_duration(secs: f64) -> String {
    let s = secs.round() as u64;
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

impl Reporter for BarProgress {
    fn clear(&self) {
        self.0.finish_and_clear();
    }
}

struct LineProgress(std::sync::Mutex<Option<f64>>);

impl Progress for LineProgress {
    fn experiment(&self, index: usize, total: usize, name: &str) {
        let left = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .map_or(String::new(), |s| format!(" (~{} left)", fmt_duration(s)));
        say_err!("[{}/{total}] {name}{left}", index + 1);
    }
    fn time_left(&self, secs: f64) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(secs);
    }
    fn step(&self, _what: &str) {}
    fn finished(&self, name: &str, status: Status, wall_s: f64) {
        say_err!("      {name}: {status:?} in {wall_s:.1} s");
    }
}

impl Reporter for LineProgress {
    fn clear(&self) {}
}
