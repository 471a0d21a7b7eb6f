//! Images a tool result may carry: [`ImageData`], checked when it is made, so a request never
//! holds an image the APIs would refuse (which would fail every later request too, since the
//! history keeps it).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The media types of the images the model APIs take.
pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The most characters of a refused media type an [`ImageError`] quotes.
const MAX_SHOWN_MEDIA_TYPE: usize = 64;

/// Why a would-be image cannot be sent to a model.
///
/// The messages never hold the image's data, only what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The media type is not one of [`IMAGE_MEDIA_TYPES`].
    #[error(
        "unsupported media type {0:?} (the APIs take image/png, image/jpeg, image/gif and image/webp)"
    )]
    UnsupportedMediaType(String),
    /// The data is empty.
    #[error("the image data is empty")]
    Empty,
    /// The data is not valid standard base64.
    #[error("the image data is not valid base64 ({0})")]
    InvalidBase64(&'static str),
    /// The decoded data does not begin like a PNG, JPEG, GIF or WebP file.
    #[error("the image data is not a PNG, JPEG, GIF or WebP image")]
    NotAnImage,
}

/// One image, base64-encoded, with its media type: what a tool result may carry besides its
/// text.
///
/// Made only by [`ImageData::new`] (deserializing checks the same), so it always holds:
/// - a media type among [`IMAGE_MEDIA_TYPES`], and the right one: when the data's own
///   signature says another of those four types, that type is kept instead of the declared
///   one (the APIs refuse an image whose declared type is wrong);
/// - non-empty standard base64 (`A-Z a-z 0-9 + /`, padded with `=` to a multiple of 4);
///   line breaks and other ASCII whitespace are removed and missing padding is added.
///
/// Its `Debug` shows the media type and size, never the data, so it is safe to log.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawImage")]
pub struct ImageData {
    media_type: String,
    data: String,
}

/// The serialized form, checked by [`ImageData::new`] on the way in.
#[derive(Deserialize)]
struct RawImage {
    media_type: String,
    data: String,
}

impl TryFrom<RawImage> for ImageData {
    type Error = ImageError;

    fn try_from(raw: RawImage) -> Result<Self, ImageError> {
        ImageData::new(raw.media_type, raw.data)
    }
}

impl ImageData {
    /// An image of `media_type` (`image/png`, `image/jpeg`, `image/gif` or `image/webp`;
    /// case and surrounding spaces do not matter) whose bytes are `data`, base64-encoded.
    ///
    /// # Errors
    ///
    /// [`ImageError`] when the media type is not one of those four, the data is empty or not
    /// base64, or the decoded bytes are not an image of one of those four types.
    pub fn new(media_type: impl Into<String>, data: impl Into<String>) -> Result<Self, ImageError> {
        let declared = media_type.into().trim().to_ascii_lowercase();
        if !IMAGE_MEDIA_TYPES.contains(&declared.as_str()) {
            // What a hostile server declared is quoted in messages: keep it short.
            let shown: String = declared.chars().take(MAX_SHOWN_MEDIA_TYPE).collect();
            return Err(ImageError::UnsupportedMediaType(shown));
        }
        let mut data = data.into();
        if data.bytes().any(|b| b.is_ascii_whitespace()) {
            data.retain(|c| !c.is_ascii_whitespace());
        }
        if data.is_empty() {
            return Err(ImageError::Empty);
        }
        check_base64(&mut data)?;
        let sniffed = sniff(&decode_prefix(&data)).ok_or(ImageError::NotAnImage)?;
        Ok(Self {
            media_type: sniffed.to_owned(),
            data,
        })
    }

    /// The media type, e.g. `image/png`.
    pub fn media_type(&self) -> &str {
        &self.media_type
    }

    /// The base64-encoded bytes.
    pub fn data(&self) -> &str {
        &self.data
    }

    /// The image as a `data:` URL (`data:image/png;base64,…`), as OpenAI's APIs take it.
    pub(crate) fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type(), self.data())
    }

    /// The size of the image itself (the decoded bytes).
    pub fn decoded_len(&self) -> usize {
        let padding = self.data.bytes().rev().take_while(|&b| b == b'=').count();
        (self.data.len() / 4 * 3).saturating_sub(padding)
    }

    /// A short description for people and logs: `image/png, 12 KB`.
    pub fn describe(&self) -> String {
        format!("{}, {}", self.media_type, human_size(self.decoded_len()))
    }
}

impl fmt::Debug for ImageData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageData")
            .field("media_type", &self.media_type)
            .field(
                "data",
                &format_args!("<{} bytes of base64>", self.data.len()),
            )
            .finish()
    }
}

/// `812 bytes`, `12 KB`, `3.4 MB` (1 KB = 1024 bytes).
pub fn human_size(bytes: usize) -> String {
    const KB: usize = 1024;
    const MB: usize = 1024 * 1024;
    if bytes < KB {
        format!("{bytes} bytes")
    } else if bytes < MB {
        format!("{} KB", bytes.div_ceil(KB))
    } else {
        // Tenths of a MB, rounded up, in integers (no float casts).
        let tenths = bytes.saturating_mul(10).div_ceil(MB);
        format!("{}.{} MB", tenths / 10, tenths % 10)
    }
}

fn base64_value(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Checks `data` is standard base64, adding missing `=` padding.
fn check_base64(data: &mut String) -> Result<(), ImageError> {
    let body = data.trim_end_matches('=');
    let padding = data.len() - body.len();
    if padding > 2 {
        return Err(ImageError::InvalidBase64("too much padding"));
    }
    if !body.bytes().all(|b| base64_value(b).is_some()) {
        return Err(ImageError::InvalidBase64(
            "a character outside A-Z, a-z, 0-9, +, / (or = other than at the end)",
        ));
    }
    let needed = match body.len() % 4 {
        0 => 0,
        1 => return Err(ImageError::InvalidBase64("its length is impossible")),
        2 => 2,
        _ => 1,
    };
    if padding != 0 && padding != needed {
        return Err(ImageError::InvalidBase64("wrong padding"));
    }
    if body.is_empty() {
        return Err(ImageError::Empty);
    }
    for _ in padding..needed {
        data.push('=');
    }
    Ok(())
}

/// The first (at most 12) bytes `data` encodes; `data` is valid base64.
fn decode_prefix(data: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    let values: Vec<u8> = data
        .bytes()
        .take(16)
        .take_while(|&b| b != b'=')
        .filter_map(base64_value)
        .collect();
    for chunk in values.chunks(4) {
        let mut n: u32 = 0;
        for (i, value) in chunk.iter().enumerate() {
            n |= u32::from(*value) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        // A chunk of k characters holds k - 1 whole bytes.
        out.extend_from_slice(bytes.get(1..chunk.len()).unwrap_or_default());
    }
    out
}

/// The image type `bytes` begins like, among the four the APIs take.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP".as_slice()) {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

    #[test]
    fn decodes_the_signature() {
        assert_eq!(&decode_prefix(PNG)[..8], b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn sizes() {
        let image = ImageData::new("image/png", PNG).unwrap();
        assert_eq!(image.decoded_len(), 69);
        assert_eq!(human_size(70), "70 bytes");
        assert_eq!(human_size(12 * 1024), "12 KB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MB");
    }
}
