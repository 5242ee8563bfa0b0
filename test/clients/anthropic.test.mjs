// The Vercel AI SDK's Anthropic provider and LangChain's ChatAnthropic, unchanged, against the
// gateway's /v1/messages: on an Anthropic channel (claude-sonnet, passed through) and on an
// OpenAI-format one (gpt-4o, translated). Run by clients_test.go with clients.test.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, generateObject, tool, jsonSchema, stepCountIs } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { ChatAnthropic } from '@langchain/anthropic';
import { ToolMessage } from '@langchain/core/messages';

const base = process.env.SWITCHYARD_URL;
assert.ok(base, 'SWITCHYARD_URL is not set');
const apiKey = process.env.SWITCHYARD_CLIENT_KEY;
assert.ok(apiKey, 'SWITCHYARD_CLIENT_KEY is not set');
const anthropic = createAnthropic({ baseURL: `${base}/v1`, apiKey });
const lookup = tool({
  description: 'Look something up',
  inputSchema: jsonSchema({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] }),
  execute: async ({ query }) => `three results for ${query}`,
});
const trip = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'], additionalProperties: false };

for (const [model, mock] of [['claude-sonnet', 'claude-a'], ['gpt-4o', 'provider-a']]) {
  const hello = new RegExp(`^Hello from ${mock}`);

  test(`ai-anthropic: generateText, ${model}`, async () => {
    const r = await generateText({ model: anthropic(model), prompt: 'hello', maxRetries: 0 });
    assert.match(r.text, hello);
    assert.equal(r.finishReason, 'stop');
  });

  test(`ai-anthropic: streamText, ${model}`, async () => {
    const r = streamText({ model: anthropic(model), prompt: 'hello', maxRetries: 0, onError: ({ error }) => { throw error; } });
    let text = '';
    for await (const delta of r.textStream) text += delta;
    assert.match(text, hello);
  });

  test(`ai-anthropic: tools, ${model}`, async () => {
    const r = await generateText({ model: anthropic(model), prompt: 'find cats', tools: { lookup }, stopWhen: stepCountIs(3), maxRetries: 0 });
    assert.equal(r.steps.length, 2, JSON.stringify(r.steps.map((s) => s.finishReason)));
    assert.equal(r.steps[0].toolCalls[0].toolName, 'lookup');
    assert.deepEqual(r.steps[0].toolCalls[0].input, { query: 'find cats' });
    assert.match(r.text, hello);
  });

  test(`ai-anthropic: generateObject, ${model}`, async () => {
    const r = await generateObject({ model: anthropic(model), schema: jsonSchema(trip), prompt: 'Paris', maxRetries: 0 });
    assert.deepEqual(r.object, { city: 'Paris', days: 1 });
  });

  const chat = () => new ChatAnthropic({ model, apiKey, anthropicApiUrl: base, maxRetries: 0 });

  test(`langchain-anthropic: invoke and stream, ${model}`, async () => {
    const m = await chat().invoke('hello');
    assert.match(m.text, hello);
    let text = '';
    for await (const chunk of await chat().stream('hello')) text += chunk.text;
    assert.match(text, hello);
  });

  test(`langchain-anthropic: tools, then the tool result, ${model}`, async () => {
    const model_ = chat().bindTools([{ name: 'lookup', description: 'Look something up', input_schema: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } }]);
    const m = await model_.invoke('find cats');
    assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
    assert.deepEqual(m.tool_calls[0].args, { query: 'find cats' });
    const m2 = await model_.invoke(['find cats', m, new ToolMessage({ tool_call_id: m.tool_calls[0].id, content: 'three cats' })]);
    assert.equal(m2.tool_calls.length, 0);
    assert.match(m2.text, hello);
  });

  test(`langchain-anthropic: withStructuredOutput, ${model}`, async () => {
    const r = await chat().withStructuredOutput(trip, { name: 'trip' }).invoke('Paris');
    assert.deepEqual(r, { city: 'Paris', days: 1 });
  });
}
