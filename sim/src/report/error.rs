//! The one error type of the results writer.
//!
//! Every failure names the file or directory it was about, because the caller (the CLI) prints it
//! and exits; "permission denied" without a path is useless to whoever reads the terminal.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why writing a result failed. None of these is a bug in dmsim: they are operating errors (a
/// full disk, a read-only directory) or inputs the writer refuses (a CSV row of the wrong width).
#[derive(Debug)]
pub struct ReportError {
    /// The file or directory the operation was about.
    pub path: PathBuf,
    /// What went wrong.
    pub cause: ReportErrorCause,
}

/// The cause of a [`ReportError`].
#[derive(Debug)]
pub enum ReportErrorCause {
    /// Creating, writing, syncing or renaming failed.
    Io(std::io::Error),
    /// JSON serialization failed.
    Json(serde_json::Error),
    /// plotters refused to draw (the SVG backend draws into memory, so this is unexpected).
    Plot(String),
    /// The data handed to the writer is malformed, e.g. a CSV row with the wrong number of cells
    /// or a results-directory name that is not a single path component.
    Invalid(String),
}

impl ReportError {
    pub(crate) fn io(path: &Path, error: std::io::Error) -> ReportError {
        ReportError { path: path.to_path_buf(), cause: ReportErrorCause::Io(error) }
    }

    pub(crate) fn json(path: &Path, error: serde_json::Error) -> ReportError {
        ReportError { path: path.to_path_buf(), cause: ReportErrorCause::Json(error) }
    }

    pub(crate) fn plot(path: &Path, message: impl fmt::Display) -> ReportError {
        ReportError { path: path.to_path_buf(), cause: ReportErrorCause::Plot(message.to_string()) }
    }

    pub(crate) fn invalid(path: &Path, message: impl Into<String>) -> ReportError {
        ReportError { path: path.to_path_buf(), cause: ReportErrorCause::Invalid(message.into()) }
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.cause {
            ReportErrorCause::Io(error) => write!(f, "cannot write `{path}`: {error}"),
            ReportErrorCause::Json(error) => write!(f, "cannot serialize JSON for `{path}`: {error}"),
            ReportErrorCause::Plot(message) => write!(f, "cannot draw plot `{path}`: {message}"),
            ReportErrorCause::Invalid(message) => write!(f, "refusing to write `{path}`: {message}"),
        }
    }
}

impl std::error::Error for ReportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            ReportErrorCause::Io(error) => Some(error),
            ReportErrorCause::Json(error) => Some(error),
            ReportErrorCause::Plot(_) | ReportErrorCause::Invalid(_) => None,
        }
    }
}
