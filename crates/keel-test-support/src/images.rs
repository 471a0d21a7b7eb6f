//! Images for tests of tool results that carry them: a real 1x1 PNG, a result block holding
//! it, and valid base64 of any size that begins like a PNG (for the size limits).

use keel_provider::{ContentBlock, ImageData};

/// A 1x1 PNG, base64 (69 bytes decoded).
pub const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// A 1x1 GIF, base64.
pub const TINY_GIF: &str = "R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs=";

/// [`TINY_PNG`] as an image.
pub fn png() -> ImageData {
    ImageData::new("image/png", TINY_PNG).unwrap()
}

/// [`TINY_GIF`] as an image.
pub fn gif() -> ImageData {
    ImageData::new("image/gif", TINY_GIF).unwrap()
}

/// Valid base64 of exactly `len` characters (`len` a multiple of 4, at least 12) whose
/// decoded bytes begin with the PNG signature: an "image" of any size for the limits.
pub fn png_base64_of_len(len: usize) -> String {
    assert!(len >= 12 && len.is_multiple_of(4), "{len}");
    let mut data = String::with_capacity(len);
    // The first 12 characters encode the 8-byte PNG signature and one more byte.
    data.push_str(&TINY_PNG[..12]);
    data.extend(std::iter::repeat_n('A', len - 12));
    data
}

/// A successful tool result for call `id` with `text` and [`png`].
pub fn result_with_png(id: &str, text: &str) -> ContentBlock {
    ContentBlock::tool_result_with_images(id, text, false, vec![png()])
}
