//! The pages: the overview, one page per paper (figures, plots, claims, run metadata, the paper's
//! REPORT.md), and the NIC profiles with their sources.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::collect::{FigureResult, PaperResults};
use super::html::{cell, esc, num, page, ratio};
use super::{Counts, ProfileDoc};
use crate::report::atomic::write_atomic;
use crate::report::error::ReportError;

pub fn write_all(out: &Path, papers: &[PaperResults], profiles: &[ProfileDoc]) -> Result<(), ReportError> {
    write_atomic(&out.join("index.html"), overview(papers).as_bytes())?;
    write_atomic(&out.join("profiles.html"), profiles_page(profiles).as_bytes())?;
    for paper in papers {
        let dir = out.join(&paper.name);
        for fig in &paper.figures {
            let target = dir.join(&fig.name);
            fs::create_dir_all(&target).map_err(|e| ReportError::io(&target, e))?;
            for file in &fig.files {
                let (from, to) = (fig.dir.join(file), target.join(file));
                fs::copy(&from, &to).map_err(|e| ReportError::io(&from, e))?;
            }
        }
        write_atomic(&dir.join("index.html"), paper_page(paper).as_bytes())?;
    }
    Ok(())
}

fn counts_attrs(c: &Counts) -> String {
    format!(
        "data-figures=\"{}\" data-numeric=\"{}\" data-within=\"{}\" data-trends=\"{}\" data-holding=\"{}\" data-na=\"{}\" data-failed=\"{}\"",
        c.figures, c.numeric, c.within, c.trends, c.trends_holding, c.not_simulated, c.failed_points
    )
}

fn counts_cells(c: &Counts) -> String {
    format!(
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
        c.figures,
        ratio(c.within, c.numeric),
        ratio(c.trends_holding, c.trends),
        c.not_simulated,
        c.failed_points
    )
}

const COUNT_HEADER: &str = "<th>Figures</th><th>Paper numbers within tolerance</th><th>Trends holding</th>\
<th>Not simulated</th><th>Failed points</th>";

fn overview(papers: &[PaperResults]) -> String {
    let mut body = String::new();
    body.push_str(
        "<h1>dmsim — reproduction report</h1>\n<p>Every figure below was produced by <code>dmsim run \
         scenarios/&lt;paper&gt;/&lt;figure&gt;.json</code>; this site was built from <code>results/</code> by \
         <code>dmsim report</code>. A <em>paper number</em> row compares a number printed in the paper with the \
         simulator's value (within the row's tolerance, usually ±25 %); a <em>trend</em> row checks a direction or \
         bound the paper states. Rows for series this simulator does not build are <em>not simulated</em> and \
         counted apart, never given a value.</p>\n",
    );
    let _ = write!(body, "<table id=\"overview\">\n<tr><th>Results</th>{COUNT_HEADER}</tr>\n");
    let mut total = Counts::default();
    for p in papers {
        let c = p.counts();
        total.add(&c);
        let _ = writeln!(
            body,
            "<tr data-paper=\"{n}\" {attrs}><td><a href=\"{n}/index.html\">{n}</a></td>{cells}</tr>",
            n = esc(&p.name),
            attrs = counts_attrs(&c),
            cells = counts_cells(&c)
        );
    }
    let _ = writeln!(
        body,
        "<tr data-total {}><th>all</th>{}</tr>\n</table>",
        counts_attrs(&total),
        counts_cells(&total)
    );
    body.push_str("<h2>Figures</h2>\n");
    for p in papers {
        let _ = write!(
            body,
            "<h3><a href=\"{n}/index.html\">{n}</a></h3>\n<table>\n<tr><th>Figure</th>{COUNT_HEADER}</tr>\n",
            n = esc(&p.name)
        );
        for f in &p.figures {
            let _ = writeln!(
                body,
                "<tr><td><a href=\"{p}/index.html#{f}\">{f}</a>{badge}</td>{cells}</tr>",
                p = esc(&p.name),
                f = esc(&f.name),
                badge = role_badge(f),
                cells = counts_cells(&f.counts())
            );
        }
        body.push_str("</table>\n");
    }
    // The raw verdicts, for the page's self-check of the counts above.
    let data: serde_json::Map<String, serde_json::Value> = papers
        .iter()
        .map(|p| {
            let claims: Vec<serde_json::Value> = p
                .figures
                .iter()
                .flat_map(|f| f.claims())
                .map(|r| {
                    serde_json::json!({
                        "na": r["not_simulated"].as_bool() == Some(true) || r["sim"].is_null(),
                        "paper": r["paper"].as_f64(),
                        "within": r["within_tolerance"].as_bool(),
                        "trend": r["trend_holds"].as_bool(),
                    })
                })
                .collect();
            (p.name.clone(), serde_json::json!({ "claims": claims }))
        })
        .collect();
    // `</` cannot occur inside JSON numbers/booleans/keys we emit except in paper names: escape it.
    let json = serde_json::Value::Object(data).to_string().replace("</", "<\\/");
    let _ = writeln!(body, "<script type=\"application/json\" id=\"site-data\">{json}</script>");
    page("dmsim reproduction report", "", &body)
}

/// "calibration" or "prediction", from how the scenario's calibration note begins.
fn role_badge(f: &FigureResult) -> &'static str {
    let note = f.summary["calibration_note"].as_str().unwrap_or("").trim_start().to_ascii_lowercase();
    if note.starts_with("calibration") {
        "<span class=\"badge calibration\">calibration</span>"
    } else if note.starts_with("prediction") {
        "<span class=\"badge prediction\">prediction</span>"
    } else {
        ""
    }
}

fn paper_page(paper: &PaperResults) -> String {
    let c = paper.counts();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>{n}</h1>\n<p>{figs} figures · paper numbers within tolerance: {w} · trends holding: {t} · not simulated: {na} · failed points: {fp}</p>",
        n = esc(&paper.name),
        figs = c.figures,
        w = ratio(c.within, c.numeric),
        t = ratio(c.trends_holding, c.trends),
        na = c.not_simulated,
        fp = c.failed_points
    );
    body.push_str("<ul>\n");
    for f in &paper.figures {
        let fc = f.counts();
        let _ = writeln!(
            body,
            "<li><a href=\"#{n}\">{n}</a>{badge} — {w} within, {t} trends</li>",
            n = esc(&f.name),
            badge = role_badge(f),
            w = ratio(fc.within, fc.numeric),
            t = ratio(fc.trends_holding, fc.trends)
        );
    }
    if paper.report_md.is_some() {
        body.push_str("<li><a href=\"#report\">REPORT.md</a></li>\n");
    }
    body.push_str("</ul>\n");
    for f in &paper.figures {
        figure_section(&mut body, f);
    }
    if let Some(md) = &paper.report_md {
        body.push_str("<section class=\"report\" id=\"report\">\n");
        body.push_str(&markdown(md));
        body.push_str("</section>\n");
    }
    page(&format!("{} — dmsim", paper.name), "../", &body)
}

fn figure_section(body: &mut String, f: &FigureResult) {
    let s = &f.summary;
    let name = esc(&f.name);
    let _ = writeln!(body, "<h2 id=\"{name}\">{name}{}</h2>", role_badge(f));
    if let Some(d) = s["description"].as_str().filter(|d| !d.is_empty()) {
        let _ = writeln!(body, "<p>{}</p>", esc(d));
    }
    if f.files.iter().any(|x| x == "plot.svg") {
        let _ = writeln!(body, "<p><img class=\"plot\" src=\"{name}/plot.svg\" alt=\"plot of {name}\"></p>");
    }
    let claims = f.claims();
    if !claims.is_empty() {
        let table = format!("claims-{name}");
        let _ = writeln!(
            body,
            "<div class=\"filters\" data-table=\"{table}\"><button data-filter=\"all\" class=\"on\">all rows</button>\
             <button data-filter=\"miss\">misses</button><button data-filter=\"trend-fails\">failing trends</button>\
             <button data-filter=\"na\">not simulated</button></div>"
        );
        let _ = writeln!(
            body,
            "<table id=\"{table}\">\n<tr><th>#</th><th>Claim</th><th>Paper</th><th>Sim</th><th>Sim / paper</th>\
             <th>Tolerance</th><th>Verdict</th><th>Trend</th><th>Note (reason for a miss)</th></tr>"
        );
        for (i, r) in claims.iter().enumerate() {
            claim_row(body, i + 1, r);
        }
        body.push_str("</table>\n");
    }
    for (label, key) in [("Calibration", "calibration_note"), ("Scaling", "scaling_note")] {
        if let Some(n) = s[key].as_str().filter(|n| !n.is_empty()) {
            let _ = writeln!(body, "<div class=\"note\"><strong>{label}.</strong> {}</div>", esc(n));
        }
    }
    if let Some(failures) = s["failures"].as_array().filter(|f| !f.is_empty()) {
        let _ = writeln!(body, "<div class=\"note\"><strong>Failed points.</strong>");
        for x in failures {
            let _ = writeln!(body, "{}", cell(x));
        }
        body.push_str("</div>\n");
    }
    metadata(body, f);
}

fn claim_row(body: &mut String, index: usize, r: &serde_json::Value) {
    let na = r["not_simulated"].as_bool() == Some(true) || r["sim"].is_null();
    let within = r["within_tolerance"].as_bool();
    let trend = r["trend_holds"].as_bool();
    let mut classes = vec!["claim"];
    if na {
        classes.push("na");
    } else {
        match within {
            Some(true) => classes.push("within"),
            Some(false) => classes.push("miss"),
            None => {}
        }
        match trend {
            Some(true) => classes.push("trend-holds"),
            Some(false) => classes.push("trend-fails"),
            None => {}
        }
    }
    let verdict = match (na, within) {
        (true, _) => "not simulated",
        (_, Some(true)) => "within",
        (_, Some(false)) => "miss",
        (_, None) => "–",
    };
    let trend_text = match trend {
        Some(true) => "holds",
        Some(false) => "fails",
        None => "–",
    };
    let tolerance =
        r["tolerance"].as_f64().map_or_else(|| "–".to_string(), |t| format!("±{} %", num(100.0 * t)));
    let _ = writeln!(
        body,
        "<tr class=\"{cls}\"><td class=\"n\">{index}</td><td>{claim}</td><td class=\"n\">{paper}</td><td class=\"n\">{sim}</td>\
         <td class=\"n\">{ratio}</td><td class=\"n\">{tolerance}</td><td class=\"v\">{verdict}</td><td class=\"t\">{trend_text}</td><td>{note}</td></tr>",
        cls = classes.join(" "),
        claim = cell(&r["claim"]),
        paper = cell(&r["paper"]),
        sim = if na { "n/a".to_string() } else { cell(&r["sim"]) },
        ratio = cell(&r["ratio"]),
        note = cell(&r["note"]),
    );
}

fn metadata(body: &mut String, f: &FigureResult) {
    let s = &f.summary;
    let mut seeds: Vec<u64> =
        s["results"].as_array().into_iter().flatten().filter_map(|r| r["seed"].as_u64()).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let seeds = match seeds.as_slice() {
        [] => "–".to_string(),
        [one] => one.to_string(),
        [first, .., last] => format!("{} seeds, {first} … {last}", seeds.len()),
    };
    let profile = match s["nic_profile"].as_str() {
        Some(p) => format!("<a href=\"../profiles.html#{p}\">{p}</a>", p = esc(p)),
        None => "not recorded".to_string(),
    };
    let commit = s["commit"].as_str().map_or_else(|| "not recorded".to_string(), esc);
    let _ = writeln!(body, "<h3>Run</h3>\n<table>");
    let rows: [(&str, String); 9] = [
        ("commit (checkout at run time)", commit),
        ("NIC profile", profile),
        ("seeds", seeds),
        ("trace hash (all points)", cell(&s["trace_hash"])),
        ("points", cell(&s["points"])),
        ("events", cell(&s["events"])),
        ("simulated operations", cell(&s["simulated_ops"])),
        ("wall time (s)", cell(&s["wall_seconds"])),
        ("events per wall second", cell(&s["events_per_second"])),
    ];
    for (k, v) in rows {
        let _ = writeln!(body, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    let files: Vec<String> = f
        .files
        .iter()
        .map(|x| format!("<a href=\"{d}/{x}\">{x}</a>", d = esc(&f.name), x = esc(x)))
        .collect();
    let _ = writeln!(body, "<tr><th>files</th><td>{}</td></tr>\n</table>", files.join(" · "));
}

fn profiles_page(profiles: &[ProfileDoc]) -> String {
    let mut body = String::from(
        "<h1>NIC profiles</h1>\n<p>Every knob of the modelled fabric with its value and its source. A figure's \
         run metadata names the profile it ran with.</p>\n<ul>\n",
    );
    for p in profiles {
        let _ = writeln!(
            body,
            "<li><a href=\"#{n}\">{n}</a> — {d}</li>",
            n = esc(&p.name),
            d = esc(&p.description)
        );
    }
    body.push_str("</ul>\n");
    for p in profiles {
        let _ = writeln!(
            body,
            "<h2 id=\"{n}\">{n}</h2>\n<p>{d}</p>\n<table>\n<tr><th>Knob</th><th>Value</th><th>Source</th></tr>",
            n = esc(&p.name),
            d = esc(&p.description)
        );
        for (k, v, src) in &p.knobs {
            let _ = writeln!(
                body,
                "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td>{}</td></tr>",
                esc(k),
                esc(v),
                esc(src)
            );
        }
        body.push_str("</table>\n");
    }
    page("NIC profiles — dmsim", "", &body)
}

/// REPORT.md as HTML. Raw HTML inside the Markdown is shown as text, not interpreted: the
/// reports are ours, but the site should not execute what a results file happens to contain.
fn markdown(md: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser};
    let parser =
        Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(|e| match e {
            Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
            e => e,
        });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, parser);
    out
}
