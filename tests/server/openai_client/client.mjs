// client.mjs — the official OpenAI Node client against `octet serve`: a completion, a
// chat completion and a streamed chat (with usage). Usage: node client.mjs BASE_URL MODEL.
// Prints one "ok ..." / "FAIL ..." line per check and a final "N passed, N failed" line.
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: process.env.OCTET_API_KEY || 'none', timeout: 30000, maxRetries: 0 });
let pass = 0, fail = 0;
const check = (cond, what) => { if (cond) { pass++; console.log(`ok ${what}`); } else { fail++; console.log(`FAIL ${what}`); } };

try {
  const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  check(c.object === 'text_completion' && typeof c.choices[0].text === 'string' && c.choices[0].text.length > 0 &&
        c.usage.completion_tokens === 8 && c.choices[0].finish_reason === 'length', `completion: ${JSON.stringify(c.choices[0])}`);

  const ch = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me a story.' }],
                                                    max_tokens: 12, temperature: 0 });
  check(ch.object === 'chat.completion' && ch.choices[0].message.role === 'assistant' &&
        typeof ch.choices[0].message.content === 'string' && ch.usage.prompt_tokens > 0, `chat: ${JSON.stringify(ch.choices[0])}`);

  const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me a story.' }],
                                                        max_tokens: 12, temperature: 0, stream: true,
                                                        stream_options: { include_usage: true } });
  let text = '', finish = null, usage = null, n = 0;
  for await (const chunk of stream) {
    n++;
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.delta?.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  check(n > 2 && text === ch.choices[0].message.content && finish === ch.choices[0].finish_reason &&
        usage && usage.completion_tokens === ch.usage.completion_tokens, `streamed chat equals whole chat: '${text}' ${finish}`);

  let status = 0;
  try { await client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 2 }); }
  catch (e) { status = e.status; }
  check(status === 404, `unknown model raises NotFoundError (status ${status})`);
} catch (e) {
  fail++;
  console.log(`FAIL exception: ${e}`);
}
console.log(`openai_client: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
