// The Vercel AI SDK, LangChain JS and the openai SDK's helpers, unchanged, against the gateway on
// `make run`'s config. Run by clients_test.go, which starts the mocks and the gateway and passes its
// URL in SWITCHYARD_URL. maxRetries is 0 everywhere: a failover must be the gateway's, never a
// client's retry. The mock answers "Hello from provider-a", calls the first tool it is offered
// with {"query": <the last user text>} until the conversation holds the tool's result, and embeds
// every input as [0.01, -0.02, 0.03, ...]. Asked for JSON of a schema, it answers an instance of
// the schema whose strings are the last user text: {"city": "Paris", "days": 1} here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, generateObject, streamObject, embed, embedMany, tool, jsonSchema, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { ToolMessage } from '@langchain/core/messages';
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const base = process.env.SWITCHYARD_URL;
assert.ok(base, 'SWITCHYARD_URL is not set');
const apiKey = process.env.SWITCHYARD_CLIENT_KEY;
assert.ok(apiKey, 'SWITCHYARD_CLIENT_KEY is not set');
// The chat model and the mock that answers it: gpt-4o on provider-a (make run's config) unless
// CHAT_MODEL and CHAT_MOCK say otherwise (a Claude channel's, say).
const chatModel = process.env.CHAT_MODEL || 'gpt-4o';
const hello = new RegExp(`^Hello from ${process.env.CHAT_MOCK || 'provider-a'}`);
// CHAT_NO_RESPONSES names why the chat model's channel does not serve the Responses API: its
// tests are then skipped with that reason (reported by node --test), the chat API's still run.
const responsesSkip = process.env.CHAT_NO_RESPONSES ? { skip: process.env.CHAT_NO_RESPONSES } : {};
const onAPI = (api) => (api.includes('responses') ? responsesSkip : {});
const noStore = { openai: { store: false } };
const vector = [0.01, -0.02, 0.03, -0.04, 0.05, -0.06, 0.07, -0.08];
const closeTo = (got) => {
  assert.equal(got.length, vector.length, `embedding ${JSON.stringify(got)}`);
  got.forEach((v, i) => assert.ok(Math.abs(v - vector[i]) < 1e-6, `embedding ${JSON.stringify(got)}`));
};

// --- Vercel AI SDK ---
const ai = createOpenAI({ baseURL: `${base}/v1`, apiKey });
const lookup = tool({
  description: 'Look something up',
  inputSchema: jsonSchema({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] }),
  execute: async ({ query }) => `three results for ${query}`,
});

for (const [api, model] of [['chat', () => ai.chat(chatModel)], ['responses', () => ai.responses(chatModel)], ['default (responses)', () => ai(chatModel)]]) {
  test(`ai: generateText, ${api}`, onAPI(api), async () => {
    const r = await generateText({ model: model(), prompt: 'hello', maxRetries: 0 });
    assert.match(r.text, hello);
    assert.equal(r.finishReason, 'stop');
    assert.ok(r.usage.outputTokens > 0, JSON.stringify(r.usage));
  });

  test(`ai: streamText, ${api}`, onAPI(api), async () => {
    const r = streamText({ model: model(), prompt: 'hello', maxRetries: 0, onError: ({ error }) => { throw error; } });
    let text = '';
    for await (const delta of r.textStream) text += delta;
    assert.match(text, hello);
    assert.equal(await r.finishReason, 'stop');
  });

  // store: false, or the AI SDK's Responses models send the first step's answer back as an
  // item_reference to a stored response: the gateway stores none, and on a Claude channel refuses
  // the reference (a 400) rather than drop the turn.
  test(`ai: tools, ${api}`, onAPI(api), async () => {
    const r = await generateText({ model: model(), prompt: 'find cats', tools: { lookup }, stopWhen: stepCountIs(3), maxRetries: 0, providerOptions: noStore });
    assert.equal(r.steps.length, 2, JSON.stringify(r.steps.map((s) => s.finishReason)));
    const [call] = r.steps[0].toolCalls;
    assert.equal(call.toolName, 'lookup');
    assert.deepEqual(call.input, { query: 'find cats' });
    assert.equal(r.steps[0].toolResults[0].output, 'three results for find cats');
    assert.equal(r.steps[0].finishReason, 'tool-calls');
    assert.match(r.text, hello);
  });

  test(`ai: streamed tools, ${api}`, onAPI(api), async () => {
    const r = streamText({ model: model(), prompt: 'find dogs', tools: { lookup }, stopWhen: stepCountIs(3), maxRetries: 0, providerOptions: noStore, onError: ({ error }) => { throw error; } });
    let text = '';
    for await (const delta of r.textStream) text += delta;
    const steps = await r.steps;
    assert.equal(steps.length, 2);
    assert.equal(steps[0].toolCalls[0].toolName, 'lookup');
    assert.deepEqual(steps[0].toolCalls[0].input, { query: 'find dogs' });
    assert.match(steps[1].text, hello);
  });
}

const trip = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city', 'days'], additionalProperties: false };
const parisTrip = { city: 'Paris', days: 1 };

for (const [api, model] of [['chat', () => ai.chat(chatModel)], ['responses', () => ai.responses(chatModel)]]) {
  test(`ai: generateObject, ${api}`, onAPI(api), async () => {
    const r = await generateObject({ model: model(), schema: jsonSchema(trip), prompt: 'Paris', maxRetries: 0 });
    assert.deepEqual(r.object, parisTrip);
  });

  test(`ai: streamObject, ${api}`, onAPI(api), async () => {
    const r = streamObject({ model: model(), schema: jsonSchema(trip), prompt: 'Paris', maxRetries: 0, onError: ({ error }) => { throw error; } });
    let partials = 0;
    for await (const _ of r.partialObjectStream) partials++;
    assert.deepEqual(await r.object, parisTrip);
    assert.ok(partials >= 1);
  });
}

test('ai: embed and embedMany', async () => {
  const one = await embed({ model: ai.embedding('text-embedding-3-small'), value: 'hello', maxRetries: 0 });
  closeTo(one.embedding);
  const many = await embedMany({ model: ai.embedding('text-embedding-3-small'), values: ['a', 'b', 'c'], maxRetries: 0 });
  assert.equal(many.embeddings.length, 3);
  many.embeddings.forEach(closeTo);
});

// --- LangChain JS ---
const lcTools = [{ type: 'function', function: { name: 'lookup', description: 'Look something up', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } }];

for (const useResponsesApi of [false, true]) {
  const api = useResponsesApi ? 'responses' : 'chat';
  const chat = () => new ChatOpenAI({ model: chatModel, apiKey, maxRetries: 0, useResponsesApi, configuration: { baseURL: `${base}/v1` } });

  test(`langchain: invoke, ${api}`, onAPI(api), async () => {
    const m = await chat().invoke('hello');
    assert.match(m.text, hello);
    assert.ok(m.usage_metadata?.output_tokens > 0, JSON.stringify(m.usage_metadata));
  });

  test(`langchain: stream, ${api}`, onAPI(api), async () => {
    let text = '';
    for await (const chunk of await chat().stream('hello')) text += chunk.text;
    assert.match(text, hello);
  });

  test(`langchain: tools, then the tool result, ${api}`, onAPI(api), async () => {
    const model = chat().bindTools(lcTools);
    const m = await model.invoke('find cats');
    assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
    assert.equal(m.tool_calls[0].name, 'lookup');
    assert.deepEqual(m.tool_calls[0].args, { query: 'find cats' });
    const m2 = await model.invoke(['find cats', m, new ToolMessage({ tool_call_id: m.tool_calls[0].id, content: 'three cats' })]);
    assert.equal(m2.tool_calls.length, 0);
    assert.match(m2.text, hello);
  });

  test(`langchain: streamed tools, ${api}`, onAPI(api), async () => {
    let acc;
    for await (const chunk of await chat().bindTools(lcTools).stream('find dogs')) acc = acc ? acc.concat(chunk) : chunk;
    assert.equal(acc.tool_calls.length, 1, JSON.stringify(acc));
    assert.equal(acc.tool_calls[0].name, 'lookup');
    assert.deepEqual(acc.tool_calls[0].args, { query: 'find dogs' });
  });
}

for (const useResponsesApi of [false, true]) {
  test(`langchain: withStructuredOutput, ${useResponsesApi ? 'responses' : 'chat'}`, useResponsesApi ? responsesSkip : {}, async () => {
    const chat = new ChatOpenAI({ model: chatModel, apiKey, maxRetries: 0, useResponsesApi, configuration: { baseURL: `${base}/v1` } });
    const r = await chat.withStructuredOutput(trip, { name: 'trip' }).invoke('Paris');
    assert.deepEqual(r, parisTrip);
  });
}

test('langchain: embeddings (the openai SDK\'s default base64)', async () => {
  const e = new OpenAIEmbeddings({ model: 'text-embedding-3-small', apiKey, maxRetries: 0, configuration: { baseURL: `${base}/v1` } });
  closeTo(await e.embedQuery('hello'));
  const docs = await e.embedDocuments(['a', 'b']);
  assert.equal(docs.length, 2);
  docs.forEach(closeTo);
});

// --- the openai SDK's own helpers ---
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 20000 });
const responsesTools = [{ type: 'function', name: 'lookup', description: 'Look something up', parameters: lcTools[0].function.parameters, strict: false }];

test('openai: responses.stream().finalResponse()', responsesSkip, async () => {
  const stream = openai.responses.stream({ model: chatModel, input: 'hello' });
  let deltas = '';
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const r = await stream.finalResponse();
  assert.match(r.output_text, hello);
  assert.equal(deltas, r.output_text);
  assert.equal(r.status, 'completed');
});

test('openai: responses with a function_call, streamed and not, then its output', responsesSkip, async () => {
  const r = await openai.responses.create({ model: chatModel, input: 'find cats', tools: responsesTools });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'lookup');
  assert.deepEqual(JSON.parse(call.arguments), { query: 'find cats' });
  const s = await openai.responses.stream({ model: chatModel, input: 'find dogs', tools: responsesTools }).finalResponse();
  const scall = s.output.find((o) => o.type === 'function_call');
  assert.ok(scall, JSON.stringify(s.output));
  assert.deepEqual(JSON.parse(scall.arguments), { query: 'find dogs' });
  const r2 = await openai.responses.create({ model: chatModel, tools: responsesTools, input: [
    { role: 'user', content: 'find cats' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'three cats' }] });
  assert.equal(r2.output.filter((o) => o.type === 'function_call').length, 0);
  assert.match(r2.output_text, hello);
});

const Trip = z.object({ city: z.string(), days: z.number().int() });

test('openai: chat.completions.parse with a zod schema', async () => {
  const r = await openai.chat.completions.parse({ model: chatModel, messages: [{ role: 'user', content: 'Paris' }], response_format: zodResponseFormat(Trip, 'trip') });
  assert.deepEqual(r.choices[0].message.parsed, parisTrip);
});

test('openai: responses.parse and responses.stream with a zod text format', responsesSkip, async () => {
  const r = await openai.responses.parse({ model: chatModel, input: 'Paris', text: { format: zodTextFormat(Trip, 'trip') } });
  assert.deepEqual(r.output_parsed, parisTrip);
  const s = await openai.responses.stream({ model: chatModel, input: 'Paris', text: { format: zodTextFormat(Trip, 'trip') } }).finalResponse();
  assert.deepEqual(s.output_parsed, parisTrip);
});

// JSON mode (response_format / text.format json_object): any JSON object, no schema; on a Claude
// channel a forced tool whose input comes back as the text. The mocks' objects differ by channel.
const isObject = (text) => {
  const v = JSON.parse(text);
  assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), text);
};

test('openai: chat JSON mode, streamed and not', async () => {
  const req = { model: chatModel, messages: [{ role: 'user', content: 'Paris, as JSON' }], response_format: { type: 'json_object' } };
  const r = await openai.chat.completions.create(req);
  isObject(r.choices[0].message.content);
  assert.equal(r.choices[0].finish_reason, 'stop');
  let text = '';
  let finish;
  for await (const c of await openai.chat.completions.create({ ...req, stream: true })) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  isObject(text);
  assert.equal(finish, 'stop');
});

test('openai: responses JSON mode, streamed and not', responsesSkip, async () => {
  const req = { model: chatModel, input: 'Paris, as JSON', text: { format: { type: 'json_object' } } };
  const r = await openai.responses.create(req);
  isObject(r.output_text);
  const s = await openai.responses.stream(req).finalResponse();
  isObject(s.output_text);
  assert.equal(s.status, 'completed');
});

test('langchain: withStructuredOutput, jsonMode', async () => {
  const chat = new ChatOpenAI({ model: chatModel, apiKey, maxRetries: 0, configuration: { baseURL: `${base}/v1` } });
  const r = await chat.withStructuredOutput(trip, { name: 'trip', method: 'jsonMode' }).invoke('Paris, as JSON');
  assert.ok(r !== null && typeof r === 'object', JSON.stringify(r));
});

test('openai: embeddings, base64 by default', async () => {
  const r = await openai.embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] });
  assert.equal(r.data.length, 2);
  r.data.forEach((d) => closeTo(d.embedding));
});
