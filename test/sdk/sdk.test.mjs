// The OpenAI and Anthropic Node SDKs, unchanged, against the gateway. Run by sdk_test.go, which
// starts the mock Anthropic, Bedrock and Vertex channels and the gateway and passes its URL in SWITCHYARD_URL.
// maxRetries is 0 everywhere: a failover must be the gateway's, never an SDK retry.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const base = process.env.SWITCHYARD_URL;
assert.ok(base, 'SWITCHYARD_URL is not set');
// The gateway requires client keys and writes its audit log, as every cluster install does: both
// wrap its ResponseWriter, and neither may change what the SDKs read.
const clientKey = process.env.SWITCHYARD_CLIENT_KEY;
assert.ok(clientKey && clientKey.length >= 32, 'SWITCHYARD_CLIENT_KEY is not set');
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: clientKey, maxRetries: 0, timeout: 20000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: clientKey, maxRetries: 0, timeout: 20000 });
const tools = [{ name: 'lookup', description: 'Look something up', input_schema: { type: 'object', properties: { query: { type: 'string' } } } }];
const openaiTools = [{ type: 'function', function: { name: 'lookup', description: 'Look something up', parameters: tools[0].input_schema } }];

test('openai: chat completion from an Anthropic channel', async () => {
  const r = await openai.chat.completions.create({ model: 'claude-sonnet', messages: [{ role: 'system', content: 'terse' }, { role: 'user', content: 'hello' }] });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.match(r.choices[0].message.content, /^Hello from claude-a/);
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
});

test('openai: streaming with include_usage', async () => {
  const stream = await openai.chat.completions.create({ model: 'claude-sonnet', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] });
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  assert.match(text, /^Hello from claude-a/);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens > 0);
});

test('openai: tool calls, then the tool result', async () => {
  const messages = [{ role: 'user', content: 'find cats' }];
  const r = await openai.chat.completions.create({ model: 'claude-sonnet', messages, tools: openaiTools, tool_choice: 'auto' });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'lookup');
  assert.deepEqual(JSON.parse(call.function.arguments), { query: 'find cats' });
  messages.push(r.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'three cats' });
  const r2 = await openai.chat.completions.create({ model: 'claude-sonnet', messages, tools: openaiTools });
  assert.equal(r2.choices[0].finish_reason, 'stop');
});

test('openai: streamed tool calls', async () => {
  const runner = openai.chat.completions.stream({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'find dogs' }], tools: openaiTools });
  const final = await runner.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.function.name, 'lookup');
  assert.deepEqual(JSON.parse(call.function.arguments), { query: 'find dogs' });
});

test('anthropic: messages.create', async () => {
  const m = await anthropic.messages.create({ model: 'claude-sonnet', max_tokens: 100, system: 'terse', messages: [{ role: 'user', content: 'hello' }] });
  assert.equal(m.type, 'message');
  assert.equal(m.stop_reason, 'end_turn');
  assert.match(m.content[0].text, /^Hello from claude-a/);
});

test('anthropic: streaming', async () => {
  const stream = anthropic.messages.stream({ model: 'claude-sonnet', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] });
  let text = '';
  stream.on('text', (t) => { text += t; });
  const m = await stream.finalMessage();
  assert.match(text, /^Hello from claude-a/);
  assert.equal(m.stop_reason, 'end_turn');
  assert.ok(m.usage.output_tokens > 0);
});

test('anthropic: tool use, streamed and not', async () => {
  const m = await anthropic.messages.create({ model: 'claude-sonnet', max_tokens: 100, tools, messages: [{ role: 'user', content: 'find owls' }] });
  assert.equal(m.stop_reason, 'tool_use');
  const use = m.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(use.input, { query: 'find owls' });
  const s = await anthropic.messages.stream({ model: 'claude-sonnet', max_tokens: 100, tools, messages: [
    { role: 'user', content: 'find owls' }, { role: 'assistant', content: m.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'two owls' }] },
  ] }).finalMessage();
  assert.equal(s.stop_reason, 'end_turn');
  const s2 = await anthropic.messages.stream({ model: 'claude-sonnet', max_tokens: 100, tools, messages: [{ role: 'user', content: 'find bats' }] }).finalMessage();
  assert.deepEqual(s2.content.find((b) => b.type === 'tool_use').input, { query: 'find bats' });
});

test('anthropic: messages to an OpenAI-format channel', async () => {
  const m = await anthropic.messages.create({ model: 'gpt-4o', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] });
  assert.match(m.content[0].text, /^Hello from openai-c/);
  const s = await anthropic.messages.stream({ model: 'gpt-4o', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] }).finalMessage();
  assert.match(s.content[0].text, /^Hello from openai-c/);
});

test('anthropic: countTokens on an OpenAI-format channel (the gateway estimates it)', async () => {
  const short = await anthropic.messages.countTokens({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello' }] });
  const long = await anthropic.messages.countTokens({ model: 'gpt-4o', system: 'terse', tools, messages: [{ role: 'user', content: 'hello '.repeat(200) }] });
  assert.ok(short.input_tokens > 0 && long.input_tokens > short.input_tokens + 150, `${short.input_tokens} then ${long.input_tokens}`);
});

test('anthropic: errors in Anthropic shape', async () => {
  await assert.rejects(anthropic.messages.create({ model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  await assert.rejects(anthropic.messages.countTokens({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.error?.type === 'not_found_error');
  const stranger = new Anthropic({ baseURL: base, apiKey: 'sk-not-a-key-of-this-gateway-0000000000', maxRetries: 0, timeout: 20000 });
  await assert.rejects(stranger.messages.create({ model: 'claude-sonnet', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
  await assert.rejects(stranger.messages.countTokens({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
});

test('openai: a key the gateway does not know', async () => {
  const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-not-a-key-of-this-gateway-0000000000', maxRetries: 0, timeout: 20000 });
  await assert.rejects(stranger.chat.completions.create({ model: 'claude-sonnet', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key');
});

// claude-flaky's first channel answers 529 overloaded, claude-cut's sends an overloaded_error
// event before any content: both fail over to the second channel, unseen by the client.
for (const model of ['claude-flaky', 'claude-cut']) {
  test(`failover (${model}): openai and anthropic clients see no error`, async () => {
    for (let i = 0; i < 3; i++) {
      const r = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] });
      assert.match(r.choices[0].message.content, /^Hello from claude-b/);
      const stream = await openai.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'hello' }] });
      let text = '';
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
      assert.match(text, /^Hello from claude-b/);
      const m = await anthropic.messages.create({ model, max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] });
      assert.match(m.content[0].text, /^Hello from claude-b/);
      const s = await anthropic.messages.stream({ model, max_tokens: 50, tools, messages: [{ role: 'user', content: 'find' }] }).finalMessage();
      assert.equal(s.stop_reason, 'tool_use');
    }
  });
}

// Claude on the clouds, and failover across all three providers: claude-on-bedrock and
// claude-on-vertex are answered by the Bedrock and Vertex mocks; claude-chain's Anthropic channel
// answers 529 and its Bedrock channel 503, so Vertex answers; claude-bedrock-cut's Bedrock
// channel ends every stream with a modelStreamErrorException before any content (streams fail
// over to Vertex; answers not streamed come from Bedrock).
for (const [model, who, whoStreamed] of [
  ['claude-on-bedrock', 'bedrock', 'bedrock'],
  ['claude-on-vertex', 'vertex', 'vertex'],
  ['claude-chain', 'vertex', 'vertex'],
  ['claude-bedrock-cut', 'bedrock', 'vertex'],
]) {
  test(`clouds (${model}): openai and anthropic clients, streams and tools, no error`, async () => {
    const r = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(r.choices[0].message.content, `Hello from ${who}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const stream = await openai.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] });
    let text = '', usage = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    assert.equal(text, `Hello from ${whoStreamed}`);
    assert.ok(usage && usage.completion_tokens > 0);
    const runner = openai.chat.completions.stream({ model, messages: [{ role: 'user', content: 'find moles' }], tools: openaiTools });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), { query: 'find moles' });

    const m = await anthropic.messages.create({ model, max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] });
    assert.equal(m.content[0].text, `Hello from ${who}`);
    const s = anthropic.messages.stream({ model, max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] });
    let st = '';
    s.on('text', (t) => { st += t; });
    const sm = await s.finalMessage();
    assert.equal(st, `Hello from ${whoStreamed}`);
    assert.equal(sm.stop_reason, 'end_turn');
    const tu = await anthropic.messages.stream({ model, max_tokens: 50, tools, messages: [{ role: 'user', content: 'find voles' }] }).finalMessage();
    assert.equal(tu.stop_reason, 'tool_use');
    const use = tu.content.find((b) => b.type === 'tool_use');
    assert.deepEqual(use.input, { query: 'find voles' });
    const after = await anthropic.messages.create({ model, max_tokens: 50, tools, messages: [
      { role: 'user', content: 'find voles' }, { role: 'assistant', content: tu.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'four voles' }] },
    ] });
    assert.equal(after.stop_reason, 'end_turn');
  });
}

// Stream recovery: claude-broken's stream is cut after its first text on claude-a and continued on
// claude-b; claude-cloud-broken's ends with a Bedrock exception after its first text and goes on
// on Vertex. The SDKs read one stream: the whole answer once, one id, one text block, its usage.
const recovered = process.env.RECOVERED_TEXT;
for (const model of ['claude-broken', 'claude-cloud-broken']) {
  test(`recovery (${model}): a stream broken after its first text reaches the SDKs whole`, async () => {
    assert.ok(recovered, 'RECOVERED_TEXT is not set');
    const stream = await openai.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] });
    let text = '', finish = null, usage = null;
    const ids = new Set();
    for await (const c of stream) {
      ids.add(c.id);
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        text += ch.delta?.content ?? '';
        finish = ch.finish_reason ?? finish;
      }
    }
    assert.equal(text, recovered);
    assert.equal(finish, 'stop');
    assert.equal(ids.size, 1);
    assert.ok(usage && usage.prompt_tokens > 0 && usage.completion_tokens > 0 && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens);

    const runner = openai.chat.completions.stream({ model, messages: [{ role: 'user', content: 'hello' }] });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, recovered);

    const s = anthropic.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] });
    let st = '';
    s.on('text', (t) => { st += t; });
    const m = await s.finalMessage();
    assert.equal(st, recovered);
    assert.equal(m.content.length, 1);
    assert.equal(m.content[0].text, recovered);
    assert.equal(m.stop_reason, 'end_turn');
    assert.ok(m.usage.input_tokens > 0 && m.usage.output_tokens > 0);
  });
}
