//! `dmsim report` over the repository's own `results/`: every page's links resolve, the
//! overview's counts equal what the summaries say, and — in headless Chromium, when installed
//! (`./test.sh` installs it with `cli/scripts/install-chromium.sh` and then requires it) — every
//! page loads without a script error, console error or failed resource, and the page's own
//! recount of the claims agrees with the overview.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dmsim_sim::report::Counts;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The counts per paper, read straight from `results/<paper>/<figure>/summary.json`.
fn counts_from_summaries(results: &Path) -> BTreeMap<String, Counts> {
    let mut out = BTreeMap::new();
    for paper in std::fs::read_dir(results).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let mut c = Counts::default();
        for fig in std::fs::read_dir(&paper).unwrap().map(|e| e.unwrap().path()) {
            let Ok(text) = std::fs::read_to_string(fig.join("summary.json")) else { continue };
            let s: serde_json::Value = serde_json::from_str(&text).unwrap();
            c.figures += 1;
            for row in s["paper_vs_sim"].as_array().unwrap() {
                c.add_claim(row);
            }
            c.failed_points += s["failures"].as_array().map_or(0, Vec::len);
        }
        if c.figures > 0 {
            out.insert(paper.file_name().unwrap().to_string_lossy().into_owned(), c);
        }
    }
    out
}

/// `name="value"` attributes of the first tag containing `marker`.
fn attrs_of_tag(html: &str, marker: &str) -> Option<BTreeMap<String, String>> {
    let at = html.find(marker)?;
    let start = html[..at].rfind('<')?;
    let end = at + html[at..].find('>')?;
    let mut out = BTreeMap::new();
    let tag = &html[start..end];
    let mut rest = tag;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].rsplit(|c: char| c.is_whitespace()).next().unwrap_or("").to_string();
        let after = &rest[eq + 2..];
        let close = after.find('"')?;
        out.insert(name, after[..close].to_string());
        rest = &after[close + 1..];
    }
    Some(out)
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            html_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "html") {
            out.push(p);
        }
    }
}

/// Local `href`/`src` targets of a page that do not exist in the site.
fn broken_links(page: &Path, html: &str) -> Vec<String> {
    let mut broken = Vec::new();
    for key in ["href=\"", "src=\""] {
        for part in html.split(key).skip(1) {
            let target = &part[..part.find('"').unwrap_or(0)];
            if target.is_empty()
                || target.contains("://")
                || target.starts_with('#')
                || target.starts_with("mailto:")
            {
                continue;
            }
            let file = target.split('#').next().unwrap();
            if !file.is_empty() && !page.parent().unwrap().join(file).exists() {
                broken.push(target.to_string());
            }
        }
    }
    broken
}

fn chromium() -> Option<String> {
    if let Ok(c) = std::env::var("DMSIM_CHROMIUM") {
        return Some(c);
    }
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .map(str::to_string)
}

#[test]
fn report_site_renders_every_page_and_counts_what_the_summaries_say() {
    let out = std::env::temp_dir().join(format!("dmsim-site-{}", std::process::id()));
    let results = repo().join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_dmsim"))
        .args(["report", "--results", results.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "dmsim report failed: {}", String::from_utf8_lossy(&o.stderr));
    let expected = counts_from_summaries(&results);
    assert!(expected.len() >= 5, "results/ holds only {} papers", expected.len());
    assert!(expected.contains_key("selcc") && expected["selcc"].numeric > 20);

    let mut pages = Vec::new();
    html_files(&out, &mut pages);
    pages.sort();
    assert!(pages.len() >= expected.len() + 2, "pages: {pages:?}");
    for page in &pages {
        let html = std::fs::read_to_string(page).unwrap();
        let broken = broken_links(page, &html);
        assert!(broken.is_empty(), "{}: broken links {broken:?}", page.display());
    }

    let check_overview = |html: &str| {
        for (paper, c) in &expected {
            let a = attrs_of_tag(html, &format!("data-paper=\"{paper}\""))
                .unwrap_or_else(|| panic!("the overview has no row for {paper}"));
            let shown: Vec<usize> = ["figures", "numeric", "within", "trends", "holding", "na", "failed"]
                .iter()
                .map(|k| a[&format!("data-{k}")].parse().unwrap())
                .collect();
            let want = [
                c.figures,
                c.numeric,
                c.within,
                c.trends,
                c.trends_holding,
                c.not_simulated,
                c.failed_points,
            ];
            assert_eq!(shown, want, "{paper}: overview counts differ from the summaries");
        }
    };
    check_overview(&std::fs::read_to_string(out.join("index.html")).unwrap());

    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("DMSIM_REQUIRE_CHROMIUM").is_none(),
            "DMSIM_REQUIRE_CHROMIUM is set but no chromium was found (cli/scripts/install-chromium.sh)"
        );
        eprintln!("SKIP: no chromium on PATH; the site was checked without a browser");
        let _ = std::fs::remove_dir_all(&out);
        return;
    };
    for page in &pages {
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        let o = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--allow-file-access-from-files",
                "--dump-dom",
                &url,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{url}: chromium failed: {}", String::from_utf8_lossy(&o.stderr));
        let dom = String::from_utf8_lossy(&o.stdout);
        let root = attrs_of_tag(&dom, "<html").or_else(|| attrs_of_tag(&dom, "data-ready")).unwrap();
        let errors = dom
            .find("id=\"page-errors\"")
            .map(|i| dom[i..].split("</pre>").next().unwrap_or("").to_string())
            .unwrap_or_default();
        assert_eq!(
            root.get("data-errors").map(String::as_str),
            Some("0"),
            "{url}: errors on the page: {errors}"
        );
        assert_eq!(
            root.get("data-ready").map(String::as_str),
            Some("1"),
            "{url}: the page script did not finish"
        );
        if page.file_name().unwrap() == "index.html" && page.parent().unwrap() == out {
            check_overview(&dom);
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
