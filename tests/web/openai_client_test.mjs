// The official OpenAI Node client (npm "openai") against
// `flotilla-coordinator serve` on the embedded stories model: a completion,
// a chat completion, a streamed chat completion, and error cases (a bad
// parameter, a wrong API key), each checked for what the client returns.
//
//   node tests/web/openai_client_test.mjs BUILD/bin/flotilla-coordinator MODEL_DIR
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { check, runAgainstServer, thrown } from "./server.mjs";

const [binary, modelDir] = process.argv.slice(2);
// What a call threw, for the check's line (which error, which status).
const got = (e) =>
  ` (got ${e ? `${e.constructor.name} ${e.status ?? ""} ${e.message}` : "no error"})`;
if (!binary || !modelDir) {
  console.error("usage: openai_client_test.mjs COORDINATOR_BINARY MODEL_DIR");
  process.exit(2);
}
const keyFile = join(mkdtempSync(join(tmpdir(), "flotilla-openai-")), "key");
writeFileSync(keyFile, "test-key-123\n");
await runAgainstServer(binary, ["--model", modelDir, "--api-key-file", keyFile], async (server) => {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "test-key-123" });

  const models = await client.models.list();
  const model = models.data[0].id;
  check(model === "stories260k-moe", "models.list names the model: " + model);

  const completion = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 24, temperature: 0,
  });
  const text = completion.choices[0].text;
  check(typeof text === "string" && text.length > 20, "completion text: " + JSON.stringify(text));
  check(completion.choices[0].finish_reason === "length", "completion finish_reason length");
  check(completion.usage.completion_tokens === 24, "completion usage counts 24 tokens");
  // Greedy is deterministic: the same request gives the same text.
  const again = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 24, temperature: 0,
  });
  check(again.choices[0].text === text, "greedy completion repeats exactly");

  const chat = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Once upon a time" }],
    max_tokens: 24, temperature: 0,
  });
  const reply = chat.choices[0].message.content;
  check(chat.choices[0].message.role === "assistant", "chat reply role assistant");
  check(typeof reply === "string" && reply.length > 20, "chat reply: " + JSON.stringify(reply));

  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Once upon a time" }],
    max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = "", chunks = 0, usage = null, finish = null;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.content) streamed += choice.delta.content;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  check(chunks > 3, `the reply came in ${chunks} chunks`);
  check(streamed === reply, "streamed chat equals the whole reply");
  check(finish === "length" && usage && usage.completion_tokens === 24,
        "stream ends with finish_reason and usage");

  let error = await thrown(() => client.chat.completions.create({
    model, messages: [{ role: "user", content: "hi" }], max_tokens: -5,
  }));
  check(error instanceof OpenAI.BadRequestError && error.status === 400,
        "max_tokens -5 is a BadRequestError (400)" + got(error));
  check(/max_tokens/.test(error.message), "its message names max_tokens: " + error.message);

  const wrong = new OpenAI({ baseURL: server.url + "/v1", apiKey: "wrong", maxRetries: 0 });
  error = await thrown(() => wrong.completions.create({ model, prompt: "x", max_tokens: 1 }));
  check(error instanceof OpenAI.AuthenticationError && error.status === 401,
        "a wrong API key is an AuthenticationError (401)" + got(error));

  // Agents send their own model names: answered by the model served.
  const other = await client.completions.create({ model: "gpt-4", prompt: "x", max_tokens: 1 });
  check(other.model === model, "another model name is answered by " + model + ": " + other.model);
});
