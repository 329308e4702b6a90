import { http, startTestEngine } from './fixtures/engine/engine-app';
import { metricType, sampleValue } from './support/prometheus';
import { useTestBed } from './support/test-bed';
import { eventually } from './support/waiting';

const BOOKING = { customer: 'ada', from: 'AMS', to: 'LIS' };

/** `GET /metrics` as Prometheus scrapes it: status, content type, and the text. */
async function scrape(engine: { httpUrl: string | undefined }, headers: Record<string, string> = {}) {
  const response = await fetch(`${engine.httpUrl}/metrics`, { headers });
  return { status: response.status, contentType: response.headers.get('content-type'), text: await response.text() };
}

describe('the engine’s GET /metrics', () => {
  const bed = useTestBed();

  it('serves Duraflow’s metrics and the process’s in the text exposition format', async () => {
    const engine = await startTestEngine(bed);
    const created = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: BOOKING } });
    const failed = await http(engine, 'POST', '/tasks', { body: { workflowName: 'booking', input: { ...BOOKING, failAt: 'hotel' } } });
    expect([created.status, failed.status]).toEqual([201, 201]);

    const { status, contentType, text } = await eventually('both bookings are counted', () => scrape(engine), {
      until: ({ text }) =>
        sampleValue(text, 'duraflow_tasks_finished_total', { workflow: 'booking', outcome: 'completed' }) === 1 &&
        sampleValue(text, 'duraflow_tasks_finished_total', { workflow: 'booking', outcome: 'rolled_back' }) === 1,
    });
    expect(status).toBe(200);
    expect(contentType).toMatch(/^text\/plain;.*\bversion=0\.0\.4\b/);
    expect(metricType(text, 'duraflow_step_duration_seconds')).toBe('histogram');
    expect(sampleValue(text, 'duraflow_step_duration_seconds_count', { workflow: 'booking', step: 'book-hotel', outcome: 'failed' })).toBe(
      1,
    );
    expect(sampleValue(text, 'duraflow_compensations_total', { workflow: 'booking', step: 'book-flight', outcome: 'compensated' })).toBe(1);
    expect(sampleValue(text, 'duraflow_tasks', { workflow: 'booking', status: 'pending' })).toBe(0);
    expect(metricType(text, 'process_cpu_user_seconds_total')).toBe('counter');
  });

  it('needs the API key when DURAFLOW_API_KEY is set, like every route but /health', async () => {
    const engine = await startTestEngine(bed, { DURAFLOW_API_KEY: 'scrape-secret' });
    const refused = await scrape(engine);
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.text)).toMatchObject({ code: 'UNAUTHENTICATED' });
    const allowed = await scrape(engine, { authorization: 'Bearer scrape-secret' });
    expect(allowed.status).toBe(200);
    expect(metricType(allowed.text, 'duraflow_tasks_finished_total')).toBe('counter');
  });
});
