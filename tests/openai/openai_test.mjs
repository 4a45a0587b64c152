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
