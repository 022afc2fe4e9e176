//! HTML building blocks: escaping, number formatting, the page frame with its style and script.
//!
//! Everything is inline (style, script), so a page opened from disk needs nothing else.

use std::fmt::Write as _;

/// Escapes text for element content and double-quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number as a table shows it: 4 significant digits, no exponent for everyday magnitudes.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "∞".into()
        } else {
            "−∞".into()
        };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        return format!("{v:.3e}");
    }
    let digits = if a == 0.0 { 0 } else { (3 - a.log10().floor() as i32).clamp(0, 6) as usize };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A JSON value as a table cell: numbers formatted, strings escaped, null as an en dash.
pub fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "–".into(),
        serde_json::Value::Number(n) => n.as_f64().map_or_else(|| esc(&n.to_string()), num),
        serde_json::Value::String(s) => esc(s),
        other => esc(&other.to_string()),
    }
}

/// `part / whole` with a percentage, or an en dash for an empty whole.
pub fn ratio(part: usize, whole: usize) -> String {
    if whole == 0 {
        "–".into()
    } else {
        format!("{part} / {whole} ({:.0} %)", 100.0 * part as f64 / whole as f64)
    }
}

/// A whole page. `root` is the relative path to the site root ("" or "../").
pub fn page(title: &str, root: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 4096);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\" data-errors=\"0\" data-ready=\"0\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{t}</title>\n\
         <style>{STYLE}</style>\n<script>{ERROR_CAPTURE}</script>\n</head>\n<body>\n\
         <nav><a href=\"{root}index.html\">dmsim reproduction report</a> · <a href=\"{root}profiles.html\">NIC profiles</a></nav>\n\
         <pre id=\"page-errors\" hidden></pre>\n{body}\n<script>{PAGE_SCRIPT}</script>\n</body>\n</html>\n",
        t = esc(title),
    );
    out
}

const STYLE: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1180px;padding:0 18px 60px;color:#1d1d1f}
nav{padding:10px 0;border-bottom:1px solid #ddd;margin-bottom:14px}nav a{color:#333;text-decoration:none;font-weight:600}
h1{font-size:1.6em;margin:.4em 0}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:4px}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:13.5px}th,td{border:1px solid #d8d8d8;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f3f3f5}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.miss td.v{background:#fde2e1}tr.within td.v{background:#dff3e2}tr.trend-fails td.t{background:#fde2e1}tr.trend-holds td.t{background:#dff3e2}
tr.na{color:#888}.badge{display:inline-block;font-size:12px;padding:1px 7px;border-radius:9px;background:#eee;margin-left:8px;vertical-align:middle}
.badge.calibration{background:#fff1c2}.badge.prediction{background:#dbe9ff}
.note{background:#f7f7f9;border-left:3px solid #bbb;padding:6px 10px;margin:.6em 0;white-space:pre-wrap;font-size:13.5px}
img.plot{max-width:100%;border:1px solid #eee;background:#fff}
.filters button{margin-right:6px;border:1px solid #bbb;background:#fff;border-radius:4px;padding:2px 9px;cursor:pointer}.filters button.on{background:#333;color:#fff}
.report{border-top:2px solid #ccc;margin-top:3em}.report table{font-size:13px}
code{background:#f3f3f5;padding:0 3px;border-radius:3px}#page-errors{background:#fde2e1;padding:8px}
";

/// First in `<head>`: every script error, failed resource load and `console.error` is recorded
/// on the page (`data-errors`, `#page-errors`) so a headless browser's DOM dump shows it.
const ERROR_CAPTURE: &str = "
window.siteErrors=[];
function siteError(m){window.siteErrors.push(String(m));document.documentElement.setAttribute('data-errors',String(window.siteErrors.length));
var p=document.getElementById('page-errors');if(p){p.hidden=false;p.textContent=window.siteErrors.join('\\n');}}
window.addEventListener('error',function(e){var t=e.target;if(t&&t!==window&&(t.src||t.href)){siteError('failed to load '+(t.src||t.href));}else{siteError(e.message);}},true);
window.addEventListener('unhandledrejection',function(e){siteError('unhandled rejection: '+e.reason);});
(function(){var ce=console.error;console.error=function(){siteError(Array.prototype.join.call(arguments,' '));ce.apply(console,arguments);};})();
";

/// Last in `<body>`: claim filters, and the overview's self-check (its counts recomputed from
/// the embedded claims with the same rule as `Counts::add_claim`). Sets `data-ready` when done.
const PAGE_SCRIPT: &str = "
(function(){
document.querySelectorAll('.filters').forEach(function(bar){
  var table=document.getElementById(bar.getAttribute('data-table'));
  bar.querySelectorAll('button').forEach(function(b){b.addEventListener('click',function(){
    var f=b.getAttribute('data-filter');
    table.querySelectorAll('tr.claim').forEach(function(r){r.hidden=!(f==='all'||r.classList.contains(f));});
    bar.querySelectorAll('button').forEach(function(x){x.classList.toggle('on',x===b);});
  });});
});
var data=document.getElementById('site-data');
if(data){
  var papers=JSON.parse(data.textContent);
  Object.keys(papers).forEach(function(name){
    var p=papers[name],c={numeric:0,within:0,trends:0,holding:0,na:0};
    p.claims.forEach(function(r){
      if(r.na){c.na++;return;}
      if(r.paper!==null&&r.within!==null){c.numeric++;if(r.within)c.within++;}
      if(r.trend!==null){c.trends++;if(r.trend)c.holding++;}
    });
    var row=document.querySelector('tr[data-paper=\"'+name+'\"]');
    if(!row){siteError('overview has no row for '+name);return;}
    Object.keys(c).forEach(function(k){
      if(String(c[k])!==row.getAttribute('data-'+k)){siteError(name+': '+k+' is '+row.getAttribute('data-'+k)+' on the page but '+c[k]+' in the claims');}
    });
  });
}
document.documentElement.setAttribute('data-ready','1');
})();
";

#[cfg(test)]
mod tests {
    use super::{esc, num};

    #[test]
    fn numbers_read_like_a_table() {
        assert_eq!(num(0.623), "0.623");
        assert_eq!(num(10.4), "10.4");
        assert_eq!(num(3.3181555), "3.318");
        assert_eq!(num(45537229.0), "4.554e7");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::INFINITY), "∞");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
