//! Charts as inline SVG, drawn by hand: axes with nice ticks (linear, decimal log or binary log
//! for sizes), curves, grouped bars, sample distributions and ratio intervals.
//!
//! No dependencies and no network: the SVG sits inside the HTML page, styled by the page's CSS
//! classes (so a dark or printed page recolours it), and every text it carries is escaped.
//! The output is deterministic: the same data gives the same bytes. Every point and bar has a
//! `<title>` with its numbers, shown on hover.

/// Escapes text for HTML and SVG, text or attribute. `/` and `=` are escaped too, so no text
/// from a results file can spell a URL (`//`) or look like an attribute (`src=`) in the page.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '/' => out.push_str("&#47;"),
            '=' => out.push_str("&#61;"),
            // Control characters other than tab and newline are not valid in HTML text.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A chart that draws itself as SVG, named `aria` for screen readers.
pub trait Drawing {
    fn draw(&self, aria: &str) -> String;
}

impl Drawing for BarChart {
    fn draw(&self, aria: &str) -> String {
        self.svg(aria)
    }
}

impl Drawing for LineChart {
    fn draw(&self, aria: &str) -> String {
        self.svg(aria)
    }
}

impl Drawing for DistChart {
    fn draw(&self, aria: &str) -> String {
        self.svg(aria)
    }
}

mod axis;
mod bar;
mod dist;
mod frame;
mod line;
mod ratio;

pub use axis::*;
pub use bar::*;
pub use dist::*;
pub use frame::*;
pub use line::*;
pub use ratio::*;

#[cfg(test)]
mod tests;
