//! Process maps: a published `PROCESS.md` drawn by the conventions of the protocol's authoring
//! guide ("Process maps"). Pure: no IO, no clock.
//!
//! Two steps, so that the UI can highlight a run on the same layout:
//!
//! 1. [`layout`] reads a valid [`Process`](agentprocess_process::Process) and places everything
//!    on a canvas: a Start marker; one lane per performer (Agent, then each role or person in
//!    first use); a card per step with its kind, id, instructions and badges for outputs,
//!    evidence and checks; a decision point after each step whose `next` is a list, with one
//!    line per route labelled with its `when`; an Approved line forward and a dashed Rejected
//!    line back to `on_reject` for approvals; branches that meet at a join bar; an End marker
//!    with the outcome for each `finish`. Flow reads left to right. The result,
//!    [`ProcessMap`], is plain data.
//! 2. [`render_svg`] draws a [`ProcessMap`] as a standalone SVG 1.1 document that scales to
//!    any width, with a [`Highlight`] of a run's current and completed steps, or
//!    [`Highlight::none`] for a process version.
//!
//! ```
//! # let bytes = b"---\nname: hello\ndescription: Say hello.\nsteps:\n  - id: greet\n    agent: Say hello.\n  - id: done\n    finish: greeted\n---\n";
//! let loaded = agentprocess_process::load(bytes, &agentprocess_process::Offer::EVERYTHING).unwrap();
//! let map = agentprocess_map::layout(&loaded.process);
//! let svg = agentprocess_map::render_svg(&map, &agentprocess_map::Highlight::none());
//! assert!(svg.contains(r#"data-step="greet""#));
//! ```

mod flow;
mod layout;
pub mod model;
mod svg;
mod text;

pub use layout::layout;
pub use model::ProcessMap;
pub use svg::{Highlight, render_svg};
