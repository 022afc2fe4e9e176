//! `dmsim report`: the static HTML site over `results/` (see `dmsim_sim::report::write_site`).

use std::path::PathBuf;
use std::process::ExitCode;

use super::{exit, shown};
use dmsim_sim::fabric::Profile;
use dmsim_sim::report::{write_site, ProfileDoc};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The results tree to report on.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Where to write the site (replaced whole).
    #[arg(long, default_value = "results/site")]
    pub out: PathBuf,
}

pub fn run(args: ReportArgs) -> ExitCode {
    if !args.results.is_dir() {
        eprintln!("error: --results {}: not a directory", shown(&args.results));
        return ExitCode::from(exit::BAD_INPUT);
    }
    let profiles: Vec<ProfileDoc> =
        Profile::names().into_iter().filter_map(Profile::named).map(profile_doc).collect();
    match write_site(&args.results, &args.out, &profiles) {
        Ok(papers) => {
            for (name, c) in &papers {
                println!(
                    "{name:<10} {:>2} figures  {:>3}/{:<3} paper numbers within tolerance  {:>3}/{:<3} trends holding  {} not simulated",
                    c.figures, c.within, c.numeric, c.trends_holding, c.trends, c.not_simulated
                );
            }
            println!("wrote {}", shown(&args.out.join("index.html")));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(exit::IO)
        }
    }
}

/// A profile's knobs in declaration order, each with its source note.
fn profile_doc(p: Profile) -> ProfileDoc {
    let json = serde_json::to_value(&p).unwrap_or_default();
    let knobs = json
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !["name", "description", "notes"].contains(&k.as_str()))
        .map(|(k, v)| {
            let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            let source = p.notes.get(k).cloned().unwrap_or_else(|| "no source recorded".into());
            (k.clone(), value, source)
        })
        .collect();
    ProfileDoc { name: p.name.clone(), description: p.description.clone(), knobs }
}
