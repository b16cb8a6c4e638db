// The official OpenAI SDK for Node against a running tokenwire-bridge.
//
// Environment: OPENAI_SDK (path of the installed package's entry module),
// TW_BRIDGE_URL (http://host:port/v1), TW_BRIDGE_KEY, TW_MODEL.
// Exits 0 when every check passed; prints the first failure otherwise.
import assert from 'node:assert/strict';
import { pathToFileURL } from 'node:url';

const sdk = await import(pathToFileURL(process.env.OPENAI_SDK).href);
const OpenAI = sdk.default;
const baseURL = process.env.TW_BRIDGE_URL;
const model = process.env.TW_MODEL;
const client = new OpenAI({ baseURL, apiKey: process.env.TW_BRIDGE_KEY, maxRetries: 0, timeout: 60000 });

const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check('models.list and models.retrieve', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), `listed: ${ids}`);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.object, 'model');
});

check('chat completion', async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'system', content: 'You write Python.' },
               { role: 'user', content: 'Write a function that adds two numbers.' }],
    max_tokens: 16,
    temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.ok(r.id.startsWith('chatcmpl-'));
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  // Reasoning tokens are counted apart from max_tokens by the engine.
  assert.ok(r.usage.completion_tokens > 0);
});

check('streamed chat with include_usage equals the plain answer', async () => {
  const req = {
    model,
    messages: [{ role: 'user', content: 'def fib(n):' }],
    max_tokens: 12,
    temperature: 0,
  };
  const plain = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({
    ...req, stream: true, stream_options: { include_usage: true },
  });
  let content = '', reasoning = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      reasoning += c.delta.reasoning_content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 2);
  assert.ok(usage, 'no usage chunk');
  assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
  assert.equal(usage.prompt_tokens, plain.usage.prompt_tokens);
  assert.equal(finish, plain.choices[0].finish_reason);
  assert.equal(content, plain.choices[0].message.content ?? '');
  assert.equal(reasoning, plain.choices[0].message.reasoning_content ?? '');
});

check('text completion, plain and streamed', async () => {
  const r = await client.completions.create({ model, prompt: 'def add(a, b):', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  let text = '';
  const s = await client.completions.create({ model, prompt: 'def add(a, b):', max_tokens: 8, temperature: 0, stream: true });
  for await (const c of s) text += c.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

check('several prompts, echo with logprobs, and a scored prompt', async () => {
  const prompts = ['def add(a, b):', 'import os'];
  const r = await client.completions.create({ model, prompt: prompts, max_tokens: 4, temperature: 0, n: 2, echo: true, logprobs: 1 });
  assert.equal(r.choices.length, 4);
  for (const [k, c] of r.choices.entries()) {
    assert.equal(c.index, k);
    assert.ok(c.text.startsWith(prompts[Math.floor(k / 2)]));
    assert.equal(c.logprobs.token_logprobs[0], null);
  }
  const scored = await client.completions.create({ model, prompt: prompts[0], max_tokens: 0, echo: true, logprobs: 1 });
  assert.equal(scored.choices[0].text, prompts[0]);
  assert.equal(scored.usage.completion_tokens, 0);
  assert.deepEqual(scored.choices[0].logprobs.token_logprobs,
    r.choices[0].logprobs.token_logprobs.slice(0, scored.choices[0].logprobs.tokens.length));
});

check('structured outputs: json_schema, json_object and guided_choice', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 20 },
      age: { type: 'integer' },
      tags: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 },
    },
    required: ['name', 'age', 'tags'],
    additionalProperties: false,
  };
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
    temperature: 1, seed: 3, n: 2, max_tokens: 1000,
  });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop');
    const v = JSON.parse(c.message.content);
    assert.deepEqual(Object.keys(v), ['name', 'age', 'tags']);
    assert.equal(typeof v.name, 'string');
    assert.ok(Number.isInteger(v.age));
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => typeof t === 'string'));
  }
  const o = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'JSON please' }],
    response_format: { type: 'json_object' }, temperature: 0.5, seed: 1, max_tokens: 400,
  });
  if (o.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
  // vLLM's extension, as Python callers send it through extra_body
  const g = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Is it good?' }],
    guided_choice: ['good', 'bad'], temperature: 1, seed: 2, n: 2,
  });
  for (const c of g.choices) assert.ok(['good', 'bad'].includes(c.message.content), c.message.content);
  // a pattern, checked here by JavaScript's own regular expressions
  const pin = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'A PIN, as JSON.' }], temperature: 1, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'pin', strict: true, schema: {
      type: 'object', properties: { pin: { type: 'string', pattern: '^[0-9]{4}$' } },
      required: ['pin'], additionalProperties: false } } },
  });
  assert.equal(pin.choices[0].finish_reason, 'stop');
  assert.match(JSON.parse(pin.choices[0].message.content).pin, /^[0-9]{4}$/);
  await assert.rejects(
    client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'object', dependentRequired: { a: ['b'] } } } },
    }),
    (e) => e instanceof sdk.BadRequestError && e.param === 'response_format' && /dependentRequired/.test(e.message));
});

check('unknown model is NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof sdk.NotFoundError && e.status === 404 && e.code === 'model_not_found');
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof sdk.NotFoundError);
});

check('bad key is AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof sdk.AuthenticationError && e.status === 401);
  await assert.rejects(
    bad.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof sdk.AuthenticationError);
});

check('invalid request is BadRequestError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], top_logprobs: 99, logprobs: true }),
    (e) => e instanceof sdk.BadRequestError && e.status === 400);
});

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];

check('tools: request accepted, answer well formed', async () => {
  const r = await client.chat.completions.create({
    model, tools, tool_choice: 'auto', max_tokens: 24, temperature: 0,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  });
  const m = r.choices[0].message;
  assert.equal(m.role, 'assistant');
  if (m.tool_calls) {
    for (const t of m.tool_calls) {
      assert.equal(t.type, 'function');
      assert.equal(typeof t.function.name, 'string');
      JSON.parse(t.function.arguments);
    }
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
  } else {
    assert.equal(typeof m.content, 'string');
  }
});

check('tools: a tool round trip in the history', async () => {
  const messages = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{
      id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature_c": 21, "sky": "clear"}' },
  ];
  const r = await client.chat.completions.create({ model, tools, messages, max_tokens: 16, temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.usage.prompt_tokens > 20, 'the tool messages reached the prompt');
  const s = await client.chat.completions.create({ model, tools, messages, max_tokens: 8, temperature: 0, stream: true });
  let n = 0;
  for await (const c of s) n += c.choices.length;
  assert.ok(n > 0);
});

check('responses: the same answer as the chat completion it means', async () => {
  const r = await client.responses.create({
    model, instructions: 'You write Python.', input: 'Write a function that adds two numbers.',
    max_output_tokens: 16, temperature: 0,
  });
  assert.equal(r.object, 'response');
  assert.ok(r.id.startsWith('resp_'));
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  const c = await client.chat.completions.create({
    model, max_completion_tokens: 16, temperature: 0,
    messages: [{ role: 'system', content: 'You write Python.' },
               { role: 'user', content: 'Write a function that adds two numbers.' }],
  });
  assert.equal(r.output_text, c.choices[0].message.content ?? '');
  assert.equal(r.usage.output_tokens_details.reasoning_tokens,
               c.usage.completion_tokens_details?.reasoning_tokens ?? 0);
});

check('responses: streamed events build the same response', async () => {
  const req = { model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'def fib(n):' }] }],
                max_output_tokens: 24, temperature: 0, reasoning: { effort: 'minimal' } };
  const whole = await client.responses.create(req);
  const events = [];
  for await (const ev of await client.responses.create({ ...req, stream: true })) events.push(ev);
  assert.equal(events[0].type, 'response.created');
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i));
  const last = events[events.length - 1];
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, whole.output_text);
  assert.equal(last.response.output_text ?? text, whole.output_text);
  // the SDK's own accumulator checks the order of the events
  const stream = client.responses.stream(req);
  const final = await stream.finalResponse();
  const said = final.output.filter((o) => o.type === 'message')
    .flatMap((o) => o.content).map((c) => c.text).join('');
  assert.equal(said, whole.output_text);
  assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
});

check('responses: text.format json_schema gives a fitting document', async () => {
  const r = await client.responses.create({
    model, input: 'A user record as JSON.', max_output_tokens: 200, temperature: 0.8,
    reasoning: { effort: 'minimal' },
    text: { format: { type: 'json_schema', name: 'user', strict: true, schema: {
      type: 'object', additionalProperties: false, required: ['name', 'age'],
      properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 120 } } } } },
  });
  assert.equal(r.status, 'completed');
  const v = JSON.parse(r.output_text);
  assert.equal(typeof v.name, 'string');
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, r.output_text);
});

check('responses: function call items in the input reach the prompt', async () => {
  const input = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temperature_c": 21}' },
  ];
  const rtools = [{ type: 'function', ...tools[0].function }];
  const r = await client.responses.create({ model, tools: rtools, input, max_output_tokens: 8, temperature: 0 });
  assert.ok(r.usage.input_tokens > 20, 'the call and its output reached the prompt');
  assert.equal(r.tools[0].name, 'get_weather');
  await assert.rejects(client.responses.retrieve('resp_1'), (e) => e instanceof sdk.NotFoundError);
  await assert.rejects(client.responses.create({ model, input: 'x', previous_response_id: 'resp_1' }),
    (e) => e instanceof sdk.NotFoundError && e.param === 'previous_response_id');
  await assert.rejects(client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }),
    (e) => e instanceof sdk.BadRequestError && e.param === 'input[0].content[0].type');
});

check('responses: log-probabilities as the chat completion gives them', async () => {
  const req = { model, input: 'def add(a, b):', max_output_tokens: 24, temperature: 0,
                reasoning: { effort: 'minimal' }, top_logprobs: 2,
                include: ['message.output_text.logprobs'] };
  const r = await client.responses.create(req);
  assert.equal(r.top_logprobs, 2);
  const msg = r.output.find((o) => o.type === 'message');
  assert.ok(msg, 'a message item');
  const c = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'def add(a, b):' }], max_completion_tokens: 24,
    temperature: 0, reasoning_effort: 'minimal', logprobs: true, top_logprobs: 2 });
  const want = c.choices[0].logprobs.content;
  const got = msg.content[0].logprobs;
  assert.ok(want.length > 0);
  assert.deepEqual(got.map((l) => [l.token, l.logprob, l.top_logprobs.length]),
                   want.map((l) => [l.token, l.logprob, 2]));
  // streamed: the deltas carry them, and the done event holds them all
  const events = [];
  for await (const ev of await client.responses.create({ ...req, stream: true })) events.push(ev);
  const fromDeltas = events.filter((e) => e.type === 'response.output_text.delta').flatMap((e) => e.logprobs);
  const done = events.find((e) => e.type === 'response.output_text.done');
  assert.deepEqual(done.logprobs.map((l) => l.token), want.map((l) => l.token));
  assert.ok(fromDeltas.length > 0 && fromDeltas.length <= want.length);
  const last = events[events.length - 1].response;
  const lastMsg = last.output.find((o) => o.type === 'message');
  assert.equal(lastMsg.content[0].logprobs.length, want.length);
});

check('responses: kept, continued, listed and deleted', async () => {
  const settings = { model, max_output_tokens: 16, temperature: 0, reasoning: { effort: 'minimal' } };
  const first = await client.responses.create({ ...settings, input: 'Write add(a, b).' });
  assert.equal(first.store, true);
  const back = await client.responses.retrieve(first.id);
  assert.deepEqual(back, first);
  const second = await client.responses.create({ ...settings, previous_response_id: first.id,
                                                 input: 'Now sub(a, b).' });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(second.usage.input_tokens > first.usage.input_tokens, 'the first exchange reached the prompt');
  // the SDK's cursor pages through every input item, one a page
  const ids = [];
  for await (const item of client.responses.inputItems.list(second.id, { limit: 1, order: 'asc' })) ids.push(item.id);
  assert.equal(ids.length, 2 + first.output.length);
  assert.equal(new Set(ids).size, ids.length);
  const page = await client.responses.inputItems.list(second.id);
  assert.deepEqual(page.data.map((i) => i.id), [...ids].reverse());
  assert.equal(page.data[0].content[0].text, 'Now sub(a, b).');
  const gone = await client.responses.delete(first.id);
  assert.equal(gone?.deleted ?? true, true);
  await assert.rejects(client.responses.retrieve(first.id), (e) => e instanceof sdk.NotFoundError);
  // the second holds its own copy of the conversation
  const third = await client.responses.create({ ...settings, previous_response_id: second.id,
                                                input: 'And mul.', store: false });
  assert.equal(third.store, false);
  assert.ok(third.usage.input_tokens > second.usage.input_tokens);
  await assert.rejects(client.responses.retrieve(third.id), (e) => e instanceof sdk.NotFoundError);
});

check('embeddings: the SDK\'s base64 reading gives the float answer', async () => {
  const input = ['def add(a, b):', 'print(42)'];
  const viaSdk = await client.embeddings.create({ model, input });
  const asFloats = await client.embeddings.create({ model, input, encoding_format: 'float' });
  assert.equal(viaSdk.data.length, 2);
  assert.equal(viaSdk.object, 'list');
  for (let i = 0; i < 2; i++) {
    const a = viaSdk.data[i].embedding, b = asFloats.data[i].embedding;
    assert.equal(viaSdk.data[i].index, i);
    assert.equal(a.length, b.length);
    a.forEach((x, d) => assert.equal(x, Math.fround(b[d])));
    const norm = Math.sqrt(a.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `unit length, not ${norm}`);
  }
  assert.ok(viaSdk.usage.prompt_tokens > 2);
  const short = await client.embeddings.create({ model, input: 'x', dimensions: 16 });
  assert.equal(short.data[0].embedding.length, 16);
  await assert.rejects(client.embeddings.create({ model, input: [] }),
    (e) => e instanceof sdk.BadRequestError && e.param === 'input');
});

let failed = 0;
for (const [name, fn] of checks) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
process.exit(failed ? 1 : 0);
