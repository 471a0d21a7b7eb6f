//! Tool results with images: kept through dispatch and into the result block, capped in
//! number and size, and a hostile image turned into a note in the text, never a failure.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{ContentBlock, ToolCall, ToolInput};
use keel_test_support::images::{TINY_PNG, png, png_base64_of_len};
use keel_tool::{
    Effect, ImageData, MAX_IMAGE_BASE64_BYTES, MAX_IMAGES_PER_RESULT,
    MAX_RESULT_IMAGE_BASE64_BYTES, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
struct ShotArgs {
    /// The text of the result.
    text: String,
    /// Base64 lengths of the PNG images to return.
    #[serde(default)]
    sizes: Vec<usize>,
    /// Raw images `[media_type, data]` as a server would send them.
    #[serde(default)]
    raw: Vec<(String, String)>,
}

/// Returns the images it is asked for.
struct Shot;

impl Tool for Shot {
    type Args = ShotArgs;
    const NAME: &'static str = "shot";
    fn description(&self) -> &str {
        "Returns images."
    }
    fn effect(&self, _args: &ShotArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, args: ShotArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut output = ToolOutput::text(args.text);
        for size in args.sizes {
            let data = if size == 0 {
                TINY_PNG.to_owned()
            } else {
                png_base64_of_len(size)
            };
            output = output.with_image(ImageData::new("image/png", data).unwrap());
        }
        for (media_type, data) in args.raw {
            output = output.with_image_base64(&media_type, data);
        }
        Ok(output)
    }
}

async fn run(registry: &ToolRegistry, input: Value) -> ToolOutput {
    let ctx = ToolContext::new(".", "test-session");
    let call = ToolCall {
        id: "call_1",
        name: "shot",
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, &ctx).await
}

fn registry() -> ToolRegistry {
    ToolRegistry::new().with(Shot).unwrap()
}

#[tokio::test]
async fn images_reach_the_result_block() {
    let output = run(&registry(), json!({"text": "a window", "sizes": [0]})).await;
    assert!(!output.is_error);
    assert_eq!(output.content, "a window");
    assert_eq!(output.images, vec![png()]);
    assert_eq!(
        output.into_block("call_1"),
        ContentBlock::tool_result_with_images("call_1", "a window", false, vec![png()])
    );
}

#[tokio::test]
async fn the_text_limit_does_not_count_images() {
    let registry = registry().with_output_limit(100);
    let output = run(&registry, json!({"text": "short", "sizes": [4096]})).await;
    assert_eq!(output.content, "short");
    assert_eq!(output.images.len(), 1);
}

#[tokio::test]
async fn a_huge_image_is_dropped_with_a_note() {
    let huge = MAX_IMAGE_BASE64_BYTES + 4;
    let output = run(
        &registry(),
        json!({"text": "two shots", "sizes": [0, huge, MAX_IMAGE_BASE64_BYTES]}),
    )
    .await;
    assert_eq!(output.images.len(), 2, "the one at the limit is kept");
    assert_eq!(output.images[0], png());
    assert_eq!(
        output.content,
        "two shots\n[image dropped (image/png, 3.8 MB): it is 5.1 MB of base64, over the \
         limit of 5.0 MB per image]"
    );
    assert!(!output.is_error);
}

#[tokio::test]
async fn at_most_so_many_images_are_kept() {
    let sizes = vec![0; MAX_IMAGES_PER_RESULT + 2];
    let output = run(&registry(), json!({"text": "", "sizes": sizes})).await;
    assert_eq!(output.images.len(), MAX_IMAGES_PER_RESULT);
    let notes: Vec<&str> = output.content.lines().collect();
    assert_eq!(notes.len(), 2, "{}", output.content);
    for note in notes {
        assert_eq!(
            note,
            "[image dropped (image/png, 69 bytes): a result keeps at most 20 images]"
        );
    }
}

#[tokio::test]
async fn the_images_of_a_result_together_are_capped() {
    // Four fit under the total; the fifth would pass it.
    let each = MAX_RESULT_IMAGE_BASE64_BYTES / 4 - 4;
    assert!(each <= MAX_IMAGE_BASE64_BYTES);
    let output = run(&registry(), json!({"text": "x", "sizes": vec![each; 5]})).await;
    assert_eq!(output.images.len(), 4);
    assert!(
        output
            .content
            .ends_with("a result's images together may be at most 20.0 MB of base64]"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn a_hostile_image_becomes_a_note_not_a_failure() {
    let output = run(
        &registry(),
        json!({"text": "from the server", "raw": [
            ["image/svg+xml", "PHN2Zz48L3N2Zz4="],
            ["image/png", "%%% not base64 %%%"],
            ["image/png", ""],
            ["image/png", TINY_PNG],
        ]}),
    )
    .await;
    assert!(!output.is_error);
    assert_eq!(output.images, vec![png()], "the valid one is kept");
    let lines: Vec<&str> = output.content.lines().collect();
    assert_eq!(lines.len(), 4, "{}", output.content);
    assert_eq!(lines[0], "from the server");
    assert!(lines[1].starts_with("[image not shown: unsupported media type \"image/svg+xml\""));
    assert!(lines[2].starts_with("[image not shown: the image data is not valid base64"));
    assert_eq!(lines[3], "[image not shown: the image data is empty]");
}

#[test]
fn tool_output_serializes_images_only_when_there_are_some() {
    let plain = serde_json::to_value(ToolOutput::text("x")).unwrap();
    assert!(plain.get("images").is_none(), "{plain}");
    let old: ToolOutput =
        serde_json::from_value(json!({"content": "x", "is_error": false})).unwrap();
    assert_eq!(old, ToolOutput::text("x"));
    let with = ToolOutput::text("x").with_image(png());
    let text = serde_json::to_string(&with).unwrap();
    assert_eq!(serde_json::from_str::<ToolOutput>(&text).unwrap(), with);
}
