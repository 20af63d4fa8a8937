//! What reaches a terminal is text, never commands to it. A results file is input from anyone:
//! a metric id, a CPU model or a note may carry an escape sequence that retitles the window,
//! clears the screen or plants a hyperlink, a NUL, or a bidirectional override (U+202E) that
//! shows text in another order than it is. A results file read by `compare`, `report` or
//! `export` is `cleaned` as it is loaded, and every line the binary prints goes through `clean`
//! again (the `say!` macros of cli.rs), whatever part of it came from a file; the run's own
//! table, which carries colour codes of its own, is rendered from a `cleaned` copy.

use std::borrow::Cow;

/// `s` with every character a terminal would act on made visible: C0 controls (but the line
/// break) and DEL as their Unicode control pictures (ESC as U+241B), C1 controls and the
/// bidirectional embedding, override and isolate marks as U+FFFD. Each stands in one column
/// for one character, so tables stay aligned.
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts_on_terminal) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if !acts_on_terminal(c) {
                    c
                } else if (c as u32) < 0x20 {
                    char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}')
                } else if c == '\u{7F}' {
                    '\u{2421}'
                } else {
                    '\u{FFFD}'
                }
            })
            .collect(),
    )
}

/// `clean` applied to every string (keys too) of a JSON value.
pub fn clean_value(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Cow::Owned(c) = clean(s) {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_value),
        Value::Object(map) => {
            let dirty: Vec<String> = map
                .keys()
                .filter(|k| matches!(clean(k), Cow::Owned(_)))
                .cloned()
                .collect();
            for k in dirty {
                if let Some(x) = map.remove(&k) {
                    map.insert(clean(&k).into_owned(), x);
                }
            }
            map.values_mut().for_each(clean_value);
        }
        _ => {}
    }
}

/// A copy of `r` whose every string is `clean`: what a reader of a results file works on, so
/// that tables are laid out with the characters they will show.
pub fn cleaned(r: &crate::results::RunResults) -> crate::results::RunResults {
    let Ok(mut v) = serde_json::to_value(r) else {
        return r.clone();
    };
    clean_value(&mut v);
    serde_json::from_value(v).unwrap_or_else(|_| r.clone())
}

/// A character a terminal interprets rather than shows.
fn acts_on_terminal(c: char) -> bool {
    matches!(c,
        '\0'..='\u{09}' | '\u{0B}'..='\u{1F}' | '\u{7F}'..='\u{9F}'
        // Arabic letter mark, left-to-right and right-to-left marks
        | '\u{061C}' | '\u{200E}' | '\u{200F}'
        // embeddings and overrides (U+202A..U+202E), isolates (U+2066..U+2069)
        | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        // line and paragraph separators: a line break the reader cannot see coming
        | '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_nul_c1_and_bidi_marks_become_visible() {
        let hostile = "a\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]8;;http://x.test\u{1b}\\b\0c\u{9b}31md\u{202E}e\u{2066}\r\t\u{7f}";
        let out = clean(hostile);
        for c in out.chars() {
            assert!(!acts_on_terminal(c), "{c:?} left in {out:?}");
        }
        assert!(
            out.starts_with("a\u{241B}]0;owned\u{2407}\u{241B}[2J"),
            "{out}"
        );
        assert_eq!(out.chars().count(), hostile.chars().count(), "one for one");
    }

    #[test]
    fn plain_text_and_line_breaks_pass_untouched() {
        let s = "sync.mutex  12.3 ns ±1.0%\n  AMD EPYC — «ünïcode» 日本\n";
        assert!(matches!(clean(s), Cow::Borrowed(_)));
    }
}
