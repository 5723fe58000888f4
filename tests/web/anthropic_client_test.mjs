// The official Anthropic TypeScript SDK (npm "@anthropic-ai/sdk") against
// `flotilla-coordinator serve`'s Messages API on the stories model: a
// message, a stream (its events assembled by the SDK), a forced tool use
// with its result fed back, count_tokens, and the SDK's error classes.
//
//   node tests/web/anthropic_client_test.mjs BUILD/bin/flotilla-coordinator MODEL_DIR
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { check, runAgainstServer, thrown } from "./server.mjs";

const [binary, modelDir] = process.argv.slice(2);
if (!binary || !modelDir) {
  console.error("usage: anthropic_client_test.mjs COORDINATOR_BINARY MODEL_DIR");
  process.exit(2);
}
const keyFile = join(mkdtempSync(join(tmpdir(), "flotilla-anthropic-")), "key");
writeFileSync(keyFile, "test-key-456\n");
await runAgainstServer(binary, ["--model", modelDir, "--api-key-file", keyFile], async (server) => {
  const client = new Anthropic({ baseURL: server.url, apiKey: "test-key-456" });
  const model = "stories260k-moe";
  const hello = [{ role: "user", content: "Once upon a time" }];

  const message = await client.messages.create({
    model, max_tokens: 24, temperature: 0, messages: hello,
  });
  check(message.type === "message" && message.role === "assistant", "a message");
  check(message.id.startsWith("msg_"), "its id: " + message.id);
  check(message.content.length === 1 && message.content[0].type === "text" &&
        message.content[0].text.length > 20, "one text block: " + JSON.stringify(message.content));
  check(message.stop_reason === "max_tokens", "stop_reason max_tokens");
  check(message.usage.input_tokens > 0 && message.usage.output_tokens === 24,
        "usage: " + JSON.stringify(message.usage));

  const stream = client.messages.stream({
    model, max_tokens: 24, temperature: 0, messages: hello,
  });
  let deltas = 0;
  stream.on("text", () => ++deltas);
  const streamed = await stream.finalMessage();
  // How many deltas depends on how fast the tokens come (all of them may
  // be ready at the first read); the text they make is what is checked.
  check(deltas >= 1, `the text came in ${deltas} deltas`);
  check(streamed.content[0].text === message.content[0].text,
        "the stream's message equals the whole one");
  check(streamed.stop_reason === "max_tokens" && streamed.usage.output_tokens === 24,
        "the stream ends with stop_reason and usage");

  const stopped = await client.messages.create({
    model, max_tokens: 64, temperature: 0, messages: hello, stop_sequences: ["Lily"],
  });
  check(stopped.stop_reason === "stop_sequence" && stopped.stop_sequence === "Lily",
        `stop_sequence: ${stopped.stop_reason} ${stopped.stop_sequence}`);

  const tools = [{
    name: "weather",
    description: "Weather in a city",
    input_schema: {
      type: "object",
      properties: { city: { type: "string", maxLength: 16 } },
      required: ["city"],
      additionalProperties: false,
    },
  }];
  const question = { role: "user", content: "Weather in Oslo?" };
  for (const streamed of [false, true]) {
    const request = {
      model, max_tokens: 40, temperature: 1, messages: [question], tools,
      tool_choice: { type: "tool", name: "weather" },
    };
    const used = streamed ? await client.messages.stream(request).finalMessage()
                          : await client.messages.create(request);
    check(used.stop_reason === "tool_use", "stop_reason tool_use");
    const block = used.content.find((b) => b.type === "tool_use");
    check(block && block.name === "weather" && block.id.startsWith("toolu_"),
          "a tool_use block: " + JSON.stringify(used.content));
    check(typeof block.input.city === "string" && Object.keys(block.input).length === 1,
          `${streamed ? "streamed " : ""}input is valid: ${JSON.stringify(block.input)}`);
    const after = await client.messages.create({
      model, max_tokens: 12, temperature: 0, tools,
      messages: [question, { role: "assistant", content: used.content },
                 { role: "user", content: [{ type: "tool_result", tool_use_id: block.id,
                                              content: "sunny, 18 C" }] }],
    });
    check(after.content[0]?.type === "text", "the reply after the tool result is text");
  }

  const counted = await client.messages.countTokens({ model, messages: hello });
  check(counted.input_tokens === message.usage.input_tokens,
        `count_tokens ${counted.input_tokens} equals the message's input_tokens`);

  let error = await thrown(() => client.messages.create({ model, max_tokens: 0, messages: hello }));
  check(error instanceof Anthropic.BadRequestError && /max_tokens/.test(error.message),
        "max_tokens 0 is a BadRequestError naming it: " + error?.message);
  const wrong = new Anthropic({ baseURL: server.url, apiKey: "wrong", maxRetries: 0 });
  error = await thrown(() => wrong.messages.create({ model, max_tokens: 4, messages: hello }));
  check(error instanceof Anthropic.AuthenticationError, "a wrong key is an AuthenticationError");
  error = await thrown(() => client.messages.create({
    model, max_tokens: 4,
    messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } }] }],
  }));
  check(error instanceof Anthropic.BadRequestError && /image/.test(error.message),
        "an image block is refused naming it: " + error?.message);
});
