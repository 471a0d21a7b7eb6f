//! Images in tool results and prompts: what `ImageData` accepts and refuses, and how blocks with
//! and without images serialize (session files old and new).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{ContentBlock, ImageData, ImageError, Message, Role};
use keel_test_support::images::{TINY_GIF, TINY_PNG, png, png_base64_of_len};
use serde_json::json;

#[test]
fn the_four_media_types_are_taken() {
    let image = ImageData::new("image/png", TINY_PNG).unwrap();
    assert_eq!(image.media_type(), "image/png");
    assert_eq!(image.data(), TINY_PNG);
    assert_eq!(image.decoded_len(), 69);
    assert_eq!(image.describe(), "image/png, 69 bytes");
    assert_eq!(
        ImageData::new(" Image/GIF ", TINY_GIF)
            .unwrap()
            .media_type(),
        "image/gif"
    );
    // JPEG and WebP by their signatures: FF D8 FF, and RIFF....WEBP.
    assert_eq!(
        ImageData::new("image/jpeg", "/9j/4AAQ")
            .unwrap()
            .media_type(),
        "image/jpeg"
    );
    assert_eq!(
        ImageData::new("image/webp", "UklGRiQAAABXRUJQVlA4IA==")
            .unwrap()
            .media_type(),
        "image/webp"
    );
}

#[test]
fn a_hostile_image_is_refused_with_a_clear_reason() {
    let cases = [
        (
            "image/svg+xml",
            TINY_PNG,
            "unsupported media type \"image/svg+xml\"",
        ),
        (
            "text/html",
            TINY_PNG,
            "unsupported media type \"text/html\"",
        ),
        ("image/png", "", "the image data is empty"),
        ("image/png", "  \n ", "the image data is empty"),
        ("image/png", "iVBORw0K<script>", "not valid base64"),
        ("image/png", "iVBORw0KGgo====", "not valid base64"),
        ("image/png", "iVBORw0KG", "not valid base64"),
        ("image/png", "=iVBORw0KGgo", "not valid base64"),
        (
            "image/png",
            "aGVsbG8gd29ybGQ=",
            "not a PNG, JPEG, GIF or WebP image",
        ),
    ];
    for (media_type, data, expected) in cases {
        let err = ImageData::new(media_type, data).unwrap_err();
        assert!(
            err.to_string().contains(expected),
            "{media_type} {data:?}: {err}"
        );
    }
    assert_eq!(
        ImageData::new("image/png", "").unwrap_err(),
        ImageError::Empty
    );
}

#[test]
fn a_refused_media_type_is_quoted_short() {
    let long = format!("image/{}", "x".repeat(10_000));
    let err = ImageData::new(long, TINY_PNG).unwrap_err();
    assert!(err.to_string().len() < 200, "{err}");
}

#[test]
fn a_mislabelled_image_gets_its_real_type() {
    // The APIs refuse an image whose declared type is wrong; the signature decides.
    assert_eq!(
        ImageData::new("image/jpeg", TINY_PNG).unwrap().media_type(),
        "image/png"
    );
    assert_eq!(
        ImageData::new("image/png", TINY_GIF).unwrap().media_type(),
        "image/gif"
    );
}

#[test]
fn line_breaks_and_missing_padding_are_normalized() {
    let wrapped = format!("{}\r\n{}\n", &TINY_GIF[..20], &TINY_GIF[20..]);
    assert_eq!(
        ImageData::new("image/gif", wrapped).unwrap().data(),
        TINY_GIF
    );
    let unpadded = TINY_GIF.trim_end_matches('=');
    assert_eq!(
        ImageData::new("image/gif", unpadded).unwrap().data(),
        TINY_GIF
    );
}

#[test]
fn debug_never_shows_the_data() {
    let image = ImageData::new("image/png", png_base64_of_len(4096)).unwrap();
    let block = ContentBlock::tool_result_with_images("t", "shot", false, vec![image]);
    let text = format!("{block:?}");
    assert!(!text.contains("AAAAAAAA"), "{text}");
    assert!(
        text.contains("image/png") && text.contains("4096 bytes of base64"),
        "{text}"
    );
}

#[test]
fn text_only_results_serialize_as_before() {
    let block = ContentBlock::tool_result("t", "out", false);
    assert_eq!(
        serde_json::to_value(&block).unwrap(),
        json!({"type": "tool_result", "tool_use_id": "t", "content": "out", "is_error": false})
    );
}

#[test]
fn an_old_result_without_images_loads() {
    let old = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out","is_error":true}]}"#;
    let message: Message = serde_json::from_str(old).unwrap();
    assert_eq!(
        message,
        Message::new(
            Role::User,
            vec![ContentBlock::tool_result("t", "out", true)]
        )
    );
}

#[test]
fn results_with_images_round_trip() {
    let block = ContentBlock::tool_result_with_images("t", "shot", false, vec![png()]);
    let text = serde_json::to_string(&block).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["images"],
        json!([{"media_type": "image/png", "data": TINY_PNG}])
    );
    assert_eq!(serde_json::from_str::<ContentBlock>(&text).unwrap(), block);
}

#[test]
fn a_tampered_image_does_not_load() {
    let bad = json!({
        "type": "tool_result", "tool_use_id": "t", "content": "",
        "images": [{"media_type": "image/png", "data": "not base64!"}]
    });
    let err = serde_json::from_value::<ContentBlock>(bad).unwrap_err();
    assert!(err.to_string().contains("not valid base64"), "{err}");
}

#[test]
fn prompt_images_round_trip_and_a_tampered_one_does_not_load() {
    let block = ContentBlock::image(png());
    let value = serde_json::to_value(&block).unwrap();
    assert_eq!(
        value,
        json!({"type": "image", "image": {"media_type": "image/png", "data": TINY_PNG}})
    );
    assert_eq!(
        serde_json::from_value::<ContentBlock>(value).unwrap(),
        block
    );
    let bad = json!({"type": "image", "image": {"media_type": "image/svg+xml", "data": TINY_PNG}});
    let err = serde_json::from_value::<ContentBlock>(bad).unwrap_err();
    assert!(err.to_string().contains("unsupported media type"), "{err}");
}
