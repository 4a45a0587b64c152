// The official openai client against a sluiced that has API keys
// (tests/e2e_keys_test.cc starts it and passes
//   SLUICE_HTTP_BASE  http://127.0.0.1:PORT/v1
//   SLUICE_API_KEY    a key of role generate).
// Run: node --test-reporter=tap openai_keys_test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = (apiKey) => new OpenAI({
  baseURL: process.env.SLUICE_HTTP_BASE, apiKey, maxRetries: 0, timeout: 60_000,
});

test('a valid key is served', async () => {
  const r = await client(process.env.SLUICE_API_KEY).completions.create({
    prompt: 'Hello', max_tokens: 3, temperature: 0,
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 3);
});

test('no valid key is a 401 AuthenticationError in OpenAI\'s shape', async () => {
  await assert.rejects(
    client('not-a-key').chat.completions.create({
      messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2,
    }),
    (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.equal(e.error.type, 'authentication_error');
      assert.ok(!JSON.stringify(e.error).includes('not-a-key'));
      return true;
    });
});
