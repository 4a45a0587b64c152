// The official openai client library (package.json pins it) against a
// running sluiced. Started by tests/e2e_http_test.cc, which passes
//   SLUICE_HTTP_BASE  http://127.0.0.1:PORT/v1
//   SLUICE_EXPECT     a JSON file: the model id and the texts the gRPC API
//                     produced for the same requests and seeds
// Run: node --test-reporter=tap openai_test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const expected = JSON.parse(readFileSync(process.env.SLUICE_EXPECT, 'utf8'));
const model = expected.model;
const client = new OpenAI({
  baseURL: process.env.SLUICE_HTTP_BASE,
  apiKey: 'sluice-has-no-keys-yet',
  maxRetries: 0,
  timeout: 60_000,
});
const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hello!' },
];

test('models.list names the loaded model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  const one = await client.models.retrieve(model);
  assert.equal(one.object, 'model');
});

test('chat completion equals the gRPC greedy text', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 8, temperature: 0, ignore_eos: true,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, expected.chat_greedy_text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.prompt_tokens, expected.chat_prompt_tokens);
  assert.equal(r.usage.total_tokens, expected.chat_prompt_tokens + 8);
});

test('streamed chat completion with usage equals the gRPC stream', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_completion_tokens: 24, temperature: 0.8, seed: 7,
    ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let finish = null;
  let usage = null;
  let extension = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta.content ?? '';
      if (choice.finish_reason) {
        finish = choice.finish_reason;
        extension = chunk.sluice;
      }
    }
  }
  assert.equal(text, expected.chat_stream_text);
  assert.ok(chunks > 3, `only ${chunks} chunks`);
  assert.equal(finish, 'length');
  assert.deepEqual(usage, {
    prompt_tokens: expected.chat_prompt_tokens,
    completion_tokens: 24,
    total_tokens: expected.chat_prompt_tokens + 24,
  });
  assert.ok(extension.timings.decode_ms > 0, JSON.stringify(extension));
});

test('completion equals the gRPC text', async () => {
  const r = await client.completions.create({
    model, prompt: 'The sluice gate', max_tokens: 6, temperature: 0, ignore_eos: true,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, expected.completion_text);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 6);
});

test('unknown model is a 404 NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages }),
    (e) => {
      assert.ok(e instanceof OpenAI.NotFoundError, String(e));
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      assert.match(e.message, /model_id 'no-such-model' is not loaded/);
      return true;
    });
});

test('bad parameters are a 400 BadRequestError, streamed or not', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages, temperature: 'hot' }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, 'temperature');
      assert.equal(e.type, 'invalid_request_error');
      return true;
    });
  // The worker finds this one; the status still comes before the stream.
  await assert.rejects(
    client.chat.completions.create({ model, messages, top_p: 2, stream: true }),
    (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.match(e.message, /top_p = 2 is outside \(0, 1\]/);
      return true;
    });
});

// ---- structured outputs, tools, the Responses API (issue 21). The model has
// random weights: only the grammar makes these answers valid, so each is
// checked against its schema.
const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer' },
    color: { enum: ['red', 'green'] },
  },
  required: ['name', 'age', 'color'],
  additionalProperties: false,
};
function assertPerson(p, raw) {
  assert.equal(typeof p, 'object', raw);
  assert.deepEqual(Object.keys(p), ['name', 'age', 'color'], raw);
  assert.ok(typeof p.name === 'string' && [...p.name].length <= 10, raw);
  assert.ok(Number.isInteger(p.age), raw);
  assert.ok(['red', 'green'].includes(p.color), raw);
}
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 8 }, unit: { enum: ['c', 'f'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
}];
function assertWeatherArgs(text) {
  const a = JSON.parse(text);
  assert.deepEqual(Object.keys(a), ['city', 'unit'], text);
  assert.ok(typeof a.city === 'string' && [...a.city].length <= 8, text);
  assert.ok(['c', 'f'].includes(a.unit), text);
}

test('chat.completions.parse with a JSON schema gives a valid parsed object', async () => {
  const r = await client.chat.completions.parse({
    model, messages, max_tokens: 400, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assertPerson(r.choices[0].message.parsed, r.choices[0].message.content);
});

test('tool_choice required returns tool_calls; the result round-trips', async () => {
  const r = await client.chat.completions.create({
    model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, seed: 5,
  });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assertWeatherArgs(call.function.arguments);
  const next = await client.chat.completions.create({
    model, max_tokens: 4, tools,
    messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '-3 C' }],
  });
  assert.equal(next.choices.length, 1);
  // tool_choice none: text only, never calls.
  const none = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', max_tokens: 4 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
});

test('a streamed tool call arrives as tool_calls deltas', async () => {
  const stream = await client.chat.completions.create({
    model, messages, tools, seed: 6, stream: true,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const calls = [];
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls ?? []) {
        calls[d.index] ??= { name: '', arguments: '' };
        calls[d.index].name += d.function?.name ?? '';
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.ok(calls.length >= 1);
  for (const c of calls) {
    assert.equal(c.name, 'get_weather');
    assertWeatherArgs(c.arguments);
  }
});

test('responses.create, streamed and not', async () => {
  const r = await client.responses.create({
    model, input: 'Describe a person.', instructions: 'Be brief.', max_output_tokens: 400,
    text: { format: { type: 'json_schema', name: 'person', strict: true, schema: person } },
  });
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assertPerson(JSON.parse(r.output_text), r.output_text);
  assert.ok(r.usage.output_tokens > 0);

  const stream = await client.responses.create({ model, input: 'Hi', max_output_tokens: 6, stream: true });
  let text = '';
  let last = null;
  for await (const event of stream) {
    if (event.type === 'response.output_text.delta') text += event.delta;
    last = event;
  }
  assert.equal(last.type, 'response.incomplete');
  assert.equal(last.response.output[0].content[0].text, text);

  const call = await client.responses.create({
    model, input: 'Weather in Oslo?', tool_choice: 'required', parallel_tool_calls: false,
    tools: [{ type: 'function', ...tools[0].function }],
  });
  const item = call.output.find((o) => o.type === 'function_call');
  assert.ok(item, JSON.stringify(call.output));
  assertWeatherArgs(item.arguments);
});
