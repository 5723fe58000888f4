// What an agent framework does with the official OpenAI Node client against
// `flotilla-coordinator serve` on the stories model: a tool-call round trip
// (the model is made to call by tool_choice, its arguments kept valid by
// constrained decoding; the tool's result fed back), streamed and not, and
// json_schema replies that parse and validate at temperature 1 for several
// seeds.
//
//   node tests/web/openai_agent_test.mjs BUILD/bin/flotilla-coordinator MODEL_DIR
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { z as z4 } from "zod/v4";
import { check, runAgainstServer, thrown } from "./server.mjs";

const [binary, modelDir] = process.argv.slice(2);
if (!binary || !modelDir) {
  console.error("usage: openai_agent_test.mjs COORDINATOR_BINARY MODEL_DIR");
  process.exit(2);
}

const tools = [{
  type: "function",
  function: {
    name: "weather",
    description: "Weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["c", "f"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
}];
const person = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer" },
    pets: { type: "array", items: { type: "string" }, maxItems: 2 },
  },
  required: ["name", "age", "pets"],
  additionalProperties: false,
};
const validWeather = (args) =>
  typeof args.city === "string" && ["c", "f"].includes(args.unit) &&
  Object.keys(args).every((k) => k === "city" || k === "unit");
const validPerson = (p) =>
  typeof p.name === "string" && Number.isInteger(p.age) && Array.isArray(p.pets) &&
  p.pets.length <= 2 && p.pets.every((x) => typeof x === "string") &&
  Object.keys(p).length === 3;

await runAgainstServer(binary, ["--model", modelDir], async (server) => {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "none" });
  const model = "stories260k-moe";
  const question = { role: "user", content: "Weather in Oslo?" };

  for (const seed of [1, 2, 3]) {
    // Not streamed: the call, then its result fed back.
    const first = await client.chat.completions.create({
      model, messages: [question], tools, tool_choice: "required",
      temperature: 1, seed, max_tokens: 64,
    });
    const message = first.choices[0].message;
    check(first.choices[0].finish_reason === "tool_calls", "finish_reason tool_calls");
    check(message.tool_calls?.length === 1, "one tool call: " + JSON.stringify(message));
    const call = message.tool_calls[0];
    check(call.function.name === "weather", "the call names weather");
    const args = JSON.parse(call.function.arguments);
    check(validWeather(args), `seed ${seed}: valid arguments ${call.function.arguments}`);
    const second = await client.chat.completions.create({
      model,
      messages: [question, message,
                 { role: "tool", tool_call_id: call.id, content: "sunny, 18 C" }],
      tools, temperature: 1, seed, max_tokens: 16,
    });
    check(typeof second.choices[0].message.content === "string",
          "the reply after the tool result is text");

    // Streamed, the call named: deltas assemble into valid arguments.
    const stream = await client.chat.completions.create({
      model, messages: [question], tools, stream: true,
      tool_choice: { type: "function", function: { name: "weather" } },
      temperature: 1, seed, max_tokens: 40,
    });
    let name = "", argumentsText = "", id = "", finish = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) finish = choice.finish_reason;
      for (const t of choice.delta.tool_calls ?? []) {
        if (t.id) id = t.id;
        if (t.function?.name) name = t.function.name;
        argumentsText += t.function?.arguments ?? "";
      }
    }
    check(finish === "tool_calls" && name === "weather" && id.startsWith("call_"),
          `streamed call: ${finish} ${name} ${id}`);
    check(validWeather(JSON.parse(argumentsText)),
          `seed ${seed}: streamed arguments ${argumentsText}`);
  }

  for (const seed of [1, 2, 3, 4, 5]) {
    const r = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Tell me about a girl." }],
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
      temperature: 1, seed, max_tokens: 64,
    });
    const content = r.choices[0].message.content;
    check(validPerson(JSON.parse(content)), `seed ${seed}: json_schema reply ${content}`);
  }

  // Issue 46 item 5: zod integers as the SDKs send them. The OpenAI SDK's
  // own structured-output helper (zod 3, minimum/maximum), and zod 4's
  // toJSONSchema (what the AI SDK's generateObject and LangChain's
  // withStructuredOutput emit: the safe-integer bounds on every int).
  const Person = z.object({ name: z.string().max(12), age: z.number().int().min(0).max(150),
                            score: z.number().int() });
  const Ranked = z4.object({ n: z4.number().int(), stars: z4.number().int().min(1).max(5),
                             ratio: z4.number().min(-1).max(1) });
  for (const seed of [1, 2, 3, 4, 5]) {
    const parsed = await client.chat.completions.parse({
      model, messages: [{ role: "user", content: "Tell me about a girl." }],
      response_format: zodResponseFormat(Person, "person"),
      temperature: 1, seed, max_tokens: 64,
    });
    const got = parsed.choices[0].message.parsed;
    check(Person.safeParse(got).success, `seed ${seed}: zod 3 person ${JSON.stringify(got)}`);
    const r = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Rate it." }],
      response_format: { type: "json_schema",
                         json_schema: { name: "ranked", schema: z4.toJSONSchema(Ranked) } },
      temperature: 1, seed, max_tokens: 64,
    });
    const content = r.choices[0].message.content;
    check(Ranked.safeParse(JSON.parse(content)).success, `seed ${seed}: zod 4 ranked ${content}`);
  }

  // Issue 46: OpenAI's Responses API through the SDK's responses.create:
  // plain, streamed (the SDK assembles the events), and a function call
  // whose output is fed back as an input item.
  const plain = await client.responses.create({
    model, input: "Once upon a time", max_output_tokens: 24, temperature: 0,
  });
  check(plain.object === "response" && typeof plain.output_text === "string" &&
        plain.output_text.length > 0, "responses.create: " + JSON.stringify(plain.output_text));
  const events = await client.responses.create({
    model, input: "Once upon a time", max_output_tokens: 24, temperature: 0, stream: true,
  });
  let streamed = "", completed = null;
  for await (const e of events) {
    if (e.type === "response.output_text.delta") streamed += e.delta;
    if (e.type === "response.completed" || e.type === "response.incomplete") completed = e.response;
  }
  check(streamed === plain.output_text && completed !== null,
        "responses.create streamed gives the same text: " + JSON.stringify(streamed));
  const responseTools = [{ type: "function", name: "weather", parameters: tools[0].function.parameters }];
  for (const seed of [1, 2, 3]) {
    const called = await client.responses.create({
      model, input: [{ role: "user", content: "Weather in Oslo?" }], tools: responseTools,
      tool_choice: "required", temperature: 1, seed, max_output_tokens: 64,
    });
    const call = called.output.find((item) => item.type === "function_call");
    check(call && call.name === "weather" && validWeather(JSON.parse(call.arguments)),
          `seed ${seed}: responses function_call ${JSON.stringify(call)}`);
    const answered = await client.responses.create({
      model, tools: responseTools, temperature: 1, seed, max_output_tokens: 16,
      input: [{ role: "user", content: "Weather in Oslo?" }, call,
              { type: "function_call_output", call_id: call.call_id, output: "sunny, 18 C" }],
    });
    check(answered.output.length > 0 && typeof answered.output_text === "string",
          `seed ${seed}: the reply after the function's output: ${JSON.stringify(answered.output_text)}`);
  }

  const error = await thrown(() => client.chat.completions.create({
    model, messages: [question], max_tokens: 40,
    response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^a" } } },
  }));
  check(error instanceof OpenAI.BadRequestError && /pattern/.test(error.message),
        "a schema keyword it cannot enforce is a 400 naming it: " + error?.message);
});
