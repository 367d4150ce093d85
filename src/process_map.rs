//! `agentprocess process map PATH`: the process map of a PROCESS.md as SVG, drawn from what
//! would be published, so an author sees the map before publishing.

use crate::process_cmd::{EXIT_REFUSED, EXIT_USAGE, EXIT_VALID, OfferArgs, check_one, read_input};
use agentprocess_map::{Highlight, layout, render_svg};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct MapArgs {
    /// A PROCESS.md file, or a folder holding one (the folder's name must equal the process name).
    path: PathBuf,
    /// Write the SVG to this file instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    offer: OfferArgs,
}

/// Checks the document as `process check` does and draws it only when it would be published.
pub fn map(args: &MapArgs) -> ExitCode {
    let input = match read_input(&args.path) {
        Ok(input) => input,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let checked = check_one(&input, &args.offer.offer());
    let process = match checked.process {
        Some(process) if checked.issues.is_empty() => process,
        _ => {
            // The map must show what would be published: a refused document gets none. Issues
            // go to stderr so that `> map.svg` never captures them as a map.
            eprintln!("{}: refused, {} issue(s)", input.shown_path, checked.issues.len());
            for issue in &checked.issues {
                eprintln!("  {issue}");
            }
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    for warning in &checked.warnings {
        eprintln!("{}: warning: {warning}", input.shown_path);
    }
    let svg = render_svg(&layout(&process), &Highlight::none());
    match &args.output {
        Some(file) => {
            if let Err(e) = std::fs::write(file, svg) {
                eprintln!("error: {}: cannot write: {e}", file.display());
                return ExitCode::from(EXIT_USAGE);
            }
            println!("{}: map written to {}", input.shown_path, file.display());
        }
        None => print!("{svg}"),
    }
    ExitCode::from(EXIT_VALID)
}
