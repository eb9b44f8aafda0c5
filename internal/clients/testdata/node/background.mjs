// openai-node's background helpers over HTTP: responses.create({background, stream}) dropped
// after three events, responses.retrieve(id, {stream, starting_after}) and
// responses.stream({response_id, starting_after}) resuming it, responses.retrieve polling,
// responses.cancel ending a running background response.
import { client, check } from './clients.mjs';

const openai = client();
const slow = (tokens) => ({ 'sim.speed': '1000', 'sim.answer_tokens': tokens });

// A streamed background create, dropped after three events.
const first = await openai.responses.create({ model: 'sim', input: 'Resume me.', background: true, stream: true, metadata: slow('300') });
const head = [];
for await (const event of first) {
  head.push(event);
  if (head.length === 3) break; // the client goes; the response runs on
}
const id = head[0].response.id;
check(head[0].response.background === true, `response.created background ${head[0].response.background}`);
const after = head.at(-1).sequence_number;

// retrieve with stream and starting_after: the events after it, numbered on, to the end.
const resumed = await openai.responses.retrieve(id, { stream: true, starting_after: after });
let next = after + 1;
let last;
for await (const event of resumed) {
  check(event.sequence_number === next, `resumed event ${event.type} has sequence_number ${event.sequence_number}, want ${next}`);
  next++;
  last = event;
}
check(last && last.type === 'response.completed', `the resumed stream ends ${last && last.type}`);

// The stream helper with response_id: its accumulator rebuilds the final Response.
const helper = openai.responses.stream({ response_id: id, starting_after: after });
for await (const _ of helper);
const final = await helper.finalResponse();
check(final.id === id && final.status === 'completed' && final.output_text.length > 0, `finalResponse ${final.status} ${final.output_text}`);

// Poll, then cancel a long one.
const polled = await openai.responses.retrieve(id);
check(polled.status === 'completed' && polled.background === true, `retrieve: ${polled.status} ${polled.background}`);
const long = await openai.responses.create({ model: 'sim', input: 'Cancel me.', background: true, metadata: slow('1000000') });
check(long.status === 'queued' || long.status === 'in_progress', `create status ${long.status}`);
const cancelled = await openai.responses.cancel(long.id);
check(cancelled.status === 'cancelled', `cancel: ${cancelled.status}`);

console.log(JSON.stringify({ ok: true, resumedFrom: after + 1, events: next }));
