//! The analyze pipeline's content steps, after the integrity check: GenerateThumbnails,
//! ExtractText (text layer, then OCR of scans turned upright and straightened, with their
//! searchable archive copy) and DetermineIssuedAt, on a verified local copy of the stored
//! file. External tools run through `tools` with limits, in a sandbox; images are decoded
//! in process within a memory budget (`raster`). IndexDocument is the handler's (it writes
//! in the job's transaction).

mod archive;
pub mod dates;
mod osd;
mod pdf_guard;
mod raster;
mod sandbox;
mod scan;
mod text;
pub mod text_page;
mod thumbnail;
pub mod tools;
mod upright;

/// The entry points of the fuzz targets in `fuzz/` (not an API: nothing else calls
/// them). Re-exports only: the targets run the very code the pipeline runs.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::pdf_guard::check as pdf_guard_check;
}

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::AnalysisSettings;
use encoding_rs::Encoding;
use time::{Date, OffsetDateTime};

use tools::{Confinement, ToolError, ToolLimits};

/// What the content steps found.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// PNG, at most `thumbnail_width` wide; upright for a scan.
    pub thumbnail: Vec<u8>,
    pub text: String,
    pub issued_at: Option<Date>,
    /// A scan's searchable archive copy (a PDF of its pages upright with their text
    /// invisible over them), a file in the work folder; none for a text document or PDF.
    pub archive: Option<PathBuf>,
}

/// What one kind of file gave, before the text is cleaned and dated.
struct Found {
    thumbnail: Vec<u8>,
    text: String,
    archive: Option<PathBuf>,
}

/// Why a file could not be analyzed. All but the last two are the file's own fault and
/// permanent; each has a stable code.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error("the PDF is encrypted")]
    PdfEncrypted,
    #[error("the PDF cannot be read")]
    PdfUnreadable,
    #[error("the PDF's streams inflate beyond the limit")]
    PdfBomb,
    #[error("the PDF has a stream the bomb guard cannot judge")]
    PdfUnsupported,
    #[error("the image is larger than the limit")]
    ImageTooLarge,
    #[error("the image cannot be decoded")]
    ImageUnreadable,
    #[error("a tool ran past its time, memory or output limit")]
    ToolLimit,
    #[error("a tool is unavailable")]
    ToolUnavailable(#[source] ToolError),
    #[error("the local copy failed")]
    Io(#[from] std::io::Error),
}

impl AnalysisError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::PdfEncrypted => "pdf_encrypted",
            Self::PdfUnreadable => "pdf_unreadable",
            Self::PdfBomb => "pdf_decompression_bomb",
            Self::PdfUnsupported => "pdf_unsupported",
            Self::ImageTooLarge => "image_too_large",
            Self::ImageUnreadable => "image_unreadable",
            Self::ToolLimit => "analysis_limit_exceeded",
            Self::ToolUnavailable(_) => "tool_unavailable",
            Self::Io(_) => "storage_unavailable",
        }
    }

    pub fn safe_message(&self) -> &'static str {
        match self {
            Self::PdfEncrypted => "the PDF is password-protected",
            Self::PdfUnreadable => "the PDF is damaged or not a PDF",
            Self::PdfBomb => "the PDF expands to more data than Quire analyzes",
            Self::PdfUnsupported => "the PDF uses a compression Quire does not analyze",
            Self::ImageTooLarge => "the image is larger than Quire analyzes",
            Self::ImageUnreadable => "the image is damaged or empty",
            Self::ToolLimit => "the file took more time or memory than Quire allows",
            Self::ToolUnavailable(_) => "an analysis tool is unavailable",
            Self::Io(_) => "the document storage is unavailable",
        }
    }

    /// Worth another attempt: the environment failed, not the file.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::ToolUnavailable(_) | Self::Io(_))
    }
}

/// The kind of file, from the content type the upload sniffed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pdf,
    Image,
    Text,
}

fn kind_of(content_type: &str) -> Kind {
    if content_type == "application/pdf" {
        Kind::Pdf
    } else if content_type.starts_with("image/") {
        Kind::Image
    } else {
        Kind::Text
    }
}

pub struct Analyzer {
    settings: AnalysisSettings,
    /// How dates are read: the configuration's defaults unless `reading_dates` says
    /// the tenant's.
    dates: dates::DateReading,
}

pub(super) const MIB: u64 = 1024 * 1024;
/// A PDF text layer shorter than this (after trimming) is treated as no text layer.
const MIN_TEXT_LAYER_CHARS: usize = 16;

impl Analyzer {
    pub fn new(settings: AnalysisSettings) -> Self {
        let dates = dates::DateReading::new(&settings.date_languages, settings.date_order);
        Self { settings, dates }
    }

    /// Reads dates as `reading` says (the tenant's languages and order).
    pub fn reading_dates(self, reading: dates::DateReading) -> Self {
        Self {
            dates: reading,
            ..self
        }
    }

    pub(super) fn limits(&self, max_output_bytes: usize) -> ToolLimits {
        ToolLimits {
            timeout: Duration::from_secs(self.settings.tool_timeout_seconds),
            memory_bytes: self.settings.tool_memory_mb * MIB,
            cpu_seconds: self.settings.tool_cpu_seconds,
            max_output_bytes,
        }
    }

    /// How a tool runs: confined to the job's work folder.
    pub(super) fn confinement<'a>(&self, work: &'a Path) -> Confinement<'a> {
        Confinement {
            sandbox: self.settings.sandbox,
            work,
        }
    }

    /// Runs the content steps on `source` (a verified local copy inside `work`), using
    /// `work` for temporary files: the tools see nothing but `work`.
    pub async fn analyze(
        &self,
        source: &Path,
        content_type: &str,
        work: &Path,
    ) -> Result<Analysis, AnalysisError> {
        let found = match kind_of(content_type) {
            Kind::Pdf => self.pdf(source, work).await?,
            Kind::Image => self.image(source, work).await?,
            Kind::Text => self.text(source, text_encoding(content_type), work).await?,
        };
        let text: String = clean_text(&found.text)
            .take(self.settings.max_text_chars)
            .collect();
        let today = OffsetDateTime::now_utc().date();
        let issued_at = dates::detect_issued_at(&text, self.dates, today);
        Ok(Analysis {
            thumbnail: found.thumbnail,
            text,
            issued_at,
            archive: found.archive,
        })
    }

    async fn pdf(&self, source: &Path, work: &Path) -> Result<Found, AnalysisError> {
        let bytes = tokio::fs::read(source).await?;
        let limit = self.settings.max_pdf_inflated_mb * MIB;
        match blocking(move || pdf_guard::check(&bytes, limit)).await? {
            pdf_guard::Verdict::Fits => {}
            pdf_guard::Verdict::Bomb => return Err(AnalysisError::PdfBomb),
            pdf_guard::Verdict::Unsupported => return Err(AnalysisError::PdfUnsupported),
        }
        let thumbnail = self
            .render_first_page(source, work, upright::Correction::default())
            .await?;
        let layer = self.pdf_text_layer(source, work).await?;
        if layer.trim().chars().count() >= MIN_TEXT_LAYER_CHARS {
            return Ok(Found {
                thumbnail,
                text: layer,
                archive: None,
            });
        }
        // pdftotext ends every page with a form feed, text or none.
        let pages = layer.matches('\u{c}').count();
        self.pdf_scan(source, work, thumbnail, pages).await
    }

    async fn text(
        &self,
        source: &Path,
        encoding: &'static Encoding,
        work: &Path,
    ) -> Result<Found, AnalysisError> {
        // The whole file, as before: the upload limit bounds it, and the text is cut
        // to `max_text_chars` after cleaning. Decoding is linear, on a blocking thread
        // for a file of megabytes.
        let bytes = tokio::fs::read(source).await?;
        let text = blocking(move || decode_text(&bytes, encoding)).await?;
        let page = work.join("text.pdf");
        tokio::fs::write(&page, text_page::render(&text)).await?;
        let thumbnail = self
            .render_first_page(&page, work, upright::Correction::default())
            .await?;
        Ok(Found {
            thumbnail,
            text,
            archive: None,
        })
    }
}

/// The encoding of a text upload, from the charset its content type names (the upload's
/// sniffer wrote it: `text/plain; charset=windows-1252`). UTF-8 when none is named or
/// the label is unknown: a row written before other encodings were accepted says
/// `charset=utf-8`, and a wrong guess costs only replacement characters.
fn text_encoding(content_type: &str) -> &'static Encoding {
    content_type
        .split(';')
        .skip(1)
        .filter_map(|parameter| parameter.split_once('='))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("charset"))
        .and_then(|(_, label)| Encoding::for_label(label.trim().trim_matches('"').as_bytes()))
        .unwrap_or(encoding_rs::UTF_8)
}

/// The file's bytes as UTF-8 text: malformed sequences become U+FFFD, as
/// `from_utf8_lossy` did for UTF-8, and the encoding's own byte order mark is dropped.
/// A UTF-16 file's BOM was its sniffed proof of encoding; the encoding stays the
/// detected one even if the bytes begin with another encoding's BOM.
fn decode_text(bytes: &[u8], encoding: &'static Encoding) -> String {
    encoding.decode_with_bom_removal(bytes).0.into_owned()
}

/// Extracted text as Quire stores it: invalid UTF-8 was already replaced (U+FFFD) where
/// the bytes were read; here every control character but tab, line feed, carriage return
/// and form feed (pdftotext's page break) is dropped. PostgreSQL refuses a NUL in text,
/// and the others are no words: a file's own bytes must never fail the write that
/// stores them, nor forge the snippet markers search uses (U+0002, U+0003).
pub fn clean_text(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars()
        .filter(|ch| !ch.is_control() || matches!(ch, '\t' | '\n' | '\r' | '\u{c}'))
}

/// Runs a CPU-bound step (a decoder, the PDF guard) on a blocking thread. A panic in it
/// resumes in the calling handler, where the worker turns it into that attempt's
/// failure (`handler_panicked`): a decoder's bug on a hostile file is not the storage
/// failing, and is not worth another attempt.
async fn blocking<T: Send + 'static>(
    step: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AnalysisError> {
    match tokio::task::spawn_blocking(step).await {
        Ok(value) => Ok(value),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled: the runtime is shutting down under the handler.
        Err(error) => Err(AnalysisError::Io(std::io::Error::other(error))),
    }
}

pub(super) fn pdf_tool_error(error: ToolError) -> AnalysisError {
    match error {
        ToolError::Unavailable { .. } => AnalysisError::ToolUnavailable(error),
        ToolError::TimedOut { .. } | ToolError::OutputTooLarge { .. } => AnalysisError::ToolLimit,
        ToolError::Failed { ref stderr, .. } if stderr.contains("Incorrect password") => {
            AnalysisError::PdfEncrypted
        }
        // Killed by the CPU or memory limit.
        ToolError::Failed { ref status, .. } if status.contains("signal") => {
            AnalysisError::ToolLimit
        }
        ToolError::Failed { .. } => AnalysisError::PdfUnreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_decoded_from_the_charset_its_content_type_names() {
        let cases: [(&str, &[u8], &str); 6] = [
            ("text/plain; charset=utf-8", "café".as_bytes(), "café"),
            (
                "text/plain; charset=windows-1252",
                b"caf\xe9 \x80",
                "café €",
            ),
            ("text/plain; charset=\"ISO-8859-1\"", b"caf\xe9", "café"),
            (
                "text/plain; charset=utf-16le",
                b"\xFF\xFEc\0a\0f\0\xe9\0",
                "café",
            ),
            (
                "text/plain; charset=utf-16be",
                b"\xFE\xFF\0c\0a\0f\0\xe9",
                "café",
            ),
            ("text/plain", b"caf\xe9", "caf\u{fffd}"),
        ];
        for (content_type, bytes, expected) in cases {
            assert_eq!(
                decode_text(bytes, text_encoding(content_type)),
                expected,
                "{content_type}"
            );
        }
        assert_eq!(
            text_encoding("text/plain; charset=klingon"),
            encoding_rs::UTF_8
        );
    }

    #[test]
    fn cleaning_drops_control_characters_but_keeps_layout_and_letters() {
        let text = "a\0b\u{2}c\u{3}d\u{7f}e\u{85}f\tg\nh\r\n\u{c}Grüße \u{fffd}";
        assert_eq!(
            clean_text(text).collect::<String>(),
            "abcdef\tg\nh\r\n\u{c}Grüße \u{fffd}"
        );
    }
}

#[cfg(test)]
mod blocking_tests {
    use super::blocking;

    #[tokio::test]
    async fn a_panic_in_a_blocking_step_resumes_in_its_caller() {
        let caller = tokio::spawn(async {
            let _ = blocking(|| -> u8 { panic!("a decoder's bug") }).await;
        });
        let ended = caller.await;
        assert!(
            ended.is_err_and(|error| error.is_panic()),
            "the panic became an error value (storage_unavailable) instead"
        );
    }
}
