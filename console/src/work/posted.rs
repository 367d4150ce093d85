//! A work item form as posted: multipart (it may carry files for evidence), its CSRF token
//! checked against the session's as every signed-in form's is.

use super::fields::FormValues;
use crate::UiState;
use crate::layout::message_page;
use crate::session::{CSRF_FIELD, bad_form, csrf_refused, session_csrf_matches};
use axum::body::Bytes;
use axum::extract::Multipart;
use axum::extract::multipart::{MultipartError, MultipartRejection};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

/// The name of the form's file input.
pub const FILE_INPUT: &str = "evidence_files";

/// A file chosen in the form.
#[derive(Debug, Clone)]
pub struct PostedFile {
    pub file_name: String,
    pub content_type: String,
    pub bytes: Bytes,
}

/// Everything a work item form sent: its fields, and the files chosen (empty file inputs left
/// out).
#[derive(Debug, Clone, Default)]
pub struct PostedForm {
    pub values: FormValues,
    pub files: Vec<PostedFile>,
}

/// Reads the whole form, then checks its CSRF token: nothing in it is acted on before that.
pub async fn read_posted(
    state: &UiState,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<PostedForm, Response> {
    let mut multipart = multipart.map_err(|_| bad_form("The form was not sent as multipart/form-data."))?;
    let mut form = PostedForm::default();
    while let Some(field) = multipart.next_field().await.map_err(unreadable)? {
        let name = field.name().unwrap_or_default().to_owned();
        match field.file_name().map(str::to_owned) {
            Some(file_name) => {
                let content_type = field
                    .content_type()
                    .unwrap_or("application/octet-stream")
                    .to_owned();
                let bytes = field.bytes().await.map_err(unreadable)?;
                if name == FILE_INPUT && !file_name.is_empty() && !bytes.is_empty() {
                    form.files.push(PostedFile {
                        file_name,
                        content_type,
                        bytes,
                    });
                }
            }
            None => {
                let text = field.text().await.map_err(unreadable)?;
                form.values.0.push((name, text));
            }
        }
    }
    if !session_csrf_matches(state, headers, form.values.get(CSRF_FIELD)) {
        return Err(csrf_refused());
    }
    Ok(form)
}

/// The page for a form that could not be read: too large, or not a form at all.
fn unreadable(error: MultipartError) -> Response {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return message_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "The files are too large",
            "The files chosen are larger than this server takes in one form. Go back and choose \
             smaller files, or fewer at once.",
            None,
        );
    }
    bad_form(&format!("The form could not be read: {error}."))
}
