//! CSV: one row per metric, every field, for spreadsheets and scripts.

use crate::results::RunResults;

pub const HEADER: &str = "experiment,status,metric,unit,median,min,max,q1,q3,cv,samples,batch,noisy,placement,historical_value,historical_unit,historical_source,note,direction,values";

pub fn render(r: &RunResults) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for e in &r.experiments {
        let status = serde_json::to_value(e.status)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        for m in &e.metrics {
            let (hv, hu, hs) = match &m.historical {
                Some(h) => (h.value.to_string(), h.unit.to_string(), h.source.clone()),
                None => (String::new(), String::new(), String::new()),
            };
            let fields = [
                e.name.clone(),
                status.clone(),
                m.id.clone(),
                m.unit.to_string(),
                m.median.to_string(),
                m.min.to_string(),
                m.max.to_string(),
                m.q1.to_string(),
                m.q3.to_string(),
                m.cv.to_string(),
                m.samples.to_string(),
                m.batch.to_string(),
                m.noisy.to_string(),
                m.placement.clone(),
                hv,
                hu,
                hs,
                m.note.clone(),
                serde_json::to_value(m.direction)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                m.values
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            ];
            out.push_str(
                &fields
                    .iter()
                    .map(|f| quote(f))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            out.push('\n');
        }
    }
    out
}

/// RFC 4180 quoting: fields with commas, quotes or line breaks are quoted, quotes doubled.
pub fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// The `--csv` output.
pub const EXPORTER: super::Plain = super::Plain {
    flag: "--csv",
    label: "csv",
    render,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_follows_rfc4180() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
