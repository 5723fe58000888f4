// Issue 46 item 5: the agent frameworks' structured output against
// `flotilla-coordinator serve` on the stories model, as those frameworks
// send it: the AI SDK's generateObject (OpenAI provider, chat and Responses
// routes, strict json_schema from zod) and LangChain's withStructuredOutput
// (method jsonSchema) and bindTools with a required tool. zod integers
// with .int().min().max() (minimum / maximum in the schema); every reply
// parses and validates, 5 seeds at temperature 1.
//
//   node tests/web/structured_output_test.mjs BUILD/bin/flotilla-coordinator MODEL_DIR
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject } from "ai";
import { z } from "zod";
import { check, runAgainstServer } from "./server.mjs";

const [binary, modelDir] = process.argv.slice(2);
if (!binary || !modelDir) {
  console.error("usage: structured_output_test.mjs COORDINATOR_BINARY MODEL_DIR");
  process.exit(2);
}

// The Responses route takes no seed in the AI SDK: its warning each time is
// noise here (the replies are validated, not compared).
globalThis.AI_SDK_LOG_WARNINGS = false;

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(150),
  pets: z.number().int(),
});
const seeds = [1, 2, 3, 4, 5];

await runAgainstServer(binary, ["--model", modelDir], async (server) => {
  const openai = createOpenAI({ baseURL: server.url + "/v1", apiKey: "none" });
  for (const [route, model] of [["chat", openai.chat("any-model")],
                                ["responses", openai.responses("any-model")]]) {
    for (const seed of seeds) {
      const { object } = await generateObject({
        model, schema: Person, prompt: "Tell me about a girl.",
        temperature: 1, seed, maxOutputTokens: 64,
      });
      check(Person.safeParse(object).success,
            `AI SDK generateObject (${route}) seed ${seed}: ${JSON.stringify(object)}`);
    }
  }

  for (const seed of seeds) {
    const chat = new ChatOpenAI({
      model: "any-model", apiKey: "none", temperature: 1, maxTokens: 64,
      configuration: { baseURL: server.url + "/v1" }, modelKwargs: { seed },
    });
    const structured = chat.withStructuredOutput(Person, { method: "jsonSchema" });
    const got = await structured.invoke("Tell me about a girl.");
    check(Person.safeParse(got).success,
          `LangChain withStructuredOutput seed ${seed}: ${JSON.stringify(got)}`);
    const withTool = chat.bindTools([{
      type: "function",
      function: {
        name: "record_person", description: "Records a person",
        parameters: {
          type: "object",
          properties: { name: { type: "string", maxLength: 12 },
                        age: { type: "integer", minimum: 0, maximum: 150 } },
          required: ["name", "age"],
        },
      },
    }], { tool_choice: "any" });
    const message = await withTool.invoke("Tell me about a girl.");
    const call = message.tool_calls?.[0];
    check(call?.name === "record_person" && typeof call.args.name === "string" &&
          Number.isInteger(call.args.age) && call.args.age >= 0 && call.args.age <= 150 &&
          Object.keys(call.args).every((k) => k === "name" || k === "age"),
          `LangChain bindTools (required) seed ${seed}: ${JSON.stringify(call)}`);
  }
});
