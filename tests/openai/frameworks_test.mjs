// The frameworks agents are built on, against a running sluiced with a
// random-weight model (issue 21): the Vercel AI SDK (generateText /
// streamText with tools, generateObject with a zod schema, plain
// openai('m') on the Responses API) and LangChain JS (bindTools,
// withStructuredOutput, useResponsesApi). Only the grammar can make a random
// model's answers valid, so each is checked against its schema.
// Started by tests/e2e_http_test.cc with SLUICE_HTTP_BASE and SLUICE_MODEL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, streamText, tool } from 'ai';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const baseURL = process.env.SLUICE_HTTP_BASE;
const model = process.env.SLUICE_MODEL;
const openai = createOpenAI({ baseURL, apiKey: 'sluice-has-no-keys-yet' });

const Weather = z.object({ city: z.string().max(8), unit: z.enum(['c', 'f']) });
const Person = z.object({ name: z.string().max(10), age: z.number().int(), color: z.enum(['red', 'green']) });
const tools = { get_weather: tool({ description: 'The weather in a city', inputSchema: Weather }) };

test('AI SDK: plain openai(m) answers over the Responses API', async () => {
  const r = await generateText({ model: openai(model), prompt: 'Hello!', maxOutputTokens: 6, seed: 1 });
  assert.equal(typeof r.text, 'string');
  assert.equal(r.usage.outputTokens, 6);
});

test('AI SDK: generateText with toolChoice required returns valid tool calls', async () => {
  for (const m of [openai.chat(model), openai(model)]) {
    const r = await generateText({
      model: m, prompt: 'Weather in Oslo?', tools, toolChoice: 'required', seed: 2,
    });
    assert.ok(r.toolCalls.length >= 1, JSON.stringify(r.response?.body ?? r.text));
    for (const c of r.toolCalls) {
      assert.equal(c.toolName, 'get_weather');
      Weather.parse(c.input);
    }
  }
});

test('AI SDK: streamText streams a tool call', async () => {
  const r = streamText({
    model: openai.chat(model), prompt: 'Weather?', tools, seed: 3,
    toolChoice: { type: 'tool', toolName: 'get_weather' },
  });
  const calls = [];
  for await (const part of r.fullStream) {
    if (part.type === 'tool-call') calls.push(part);
    if (part.type === 'error') throw part.error;
  }
  assert.ok(calls.length >= 1);
  for (const c of calls) Weather.parse(c.input);
});

test('AI SDK: generateObject with a zod schema', async () => {
  for (const m of [openai.chat(model), openai(model)]) {
    const r = await generateObject({ model: m, schema: Person, prompt: 'A person.', seed: 4, maxOutputTokens: 400 });
    Person.parse(r.object);
  }
});

test('LangChain: bindTools, withStructuredOutput, useResponsesApi', async () => {
  const llm = new ChatOpenAI({ model, apiKey: 'x', configuration: { baseURL }, maxTokens: 400, maxRetries: 0 });
  const bound = llm.bindTools(
    [{ type: 'function', function: { name: 'get_weather', description: 'The weather', parameters: z.toJSONSchema(Weather) } }],
    { tool_choice: 'required' });
  const msg = await bound.invoke('Weather in Oslo?');
  assert.ok(msg.tool_calls.length >= 1, JSON.stringify(msg));
  for (const c of msg.tool_calls) Weather.parse(c.args);

  const structured = llm.withStructuredOutput(Person, { method: 'jsonSchema' });
  Person.parse(await structured.invoke('A person.'));

  const responses = new ChatOpenAI({
    model, apiKey: 'x', configuration: { baseURL }, useResponsesApi: true, maxTokens: 6, maxRetries: 0,
  });
  const answer = await responses.invoke('Hello!');
  assert.equal(typeof answer.text, 'string');
});
