// Issue 22, item 4: the hub's web view, in a real headless Chromium driven by puppeteer-core (the driver
// without a bundled browser: Debian's `chromium` package, `apt-get install chromium`; `.ci/run` installs
// it; CHROMIUM=path picks another). A real hub and real daemons publish cards; the page searches through
// the hub's `GET /agents` (PROTOCOL §8.4), shows an agent's skills and KEL, and checks the KEL (§2.4) and
// the card's signature (§3.5, §3.7) itself: "verified" for a good card, "invalid" for one changed in the
// hub's LevelDB. Card text is attacker-controlled: a `<script>` in a name must not run.
// Without a browser the tests print one line and are skipped; under CI=true that is a failure.
// ANET_WEB_SCREENSHOTS=docs/img writes the screenshots docs/HUB.md shows (web-search.png,
// web-agent-verified.png, web-agent-invalid.png).
import test, { type ExecutionContext } from 'ava';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { startNet, providerConfig, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { startHub, type Hub } from '../src/hub/server.js';
import { HubStore } from '../src/hub/store.js';
import { signerFromSeed } from '../src/identity/ed25519.js';
import { incept, encodeKel } from '../src/identity/kel.js';
import { sha256 } from '@noble/hashes/sha2.js';

// CHROMIUM, when set, is the only one tried (CHROMIUM=/nowhere shows what a machine without one does).
const CANDIDATES =
  process.env.CHROMIUM !== undefined
    ? [process.env.CHROMIUM]
    : ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
const CHROMIUM = CANDIDATES.find((p): p is string => typeof p === 'string' && existsSync(p));
const MISSING =
  'chromium not found: the hub web view tests (test/hub-web.test.ts) did not run; install it with `sudo apt-get install -y chromium` (or set CHROMIUM to its path)';
const SHOTS = process.env.ANET_WEB_SCREENSHOTS;
/** The page's own verifier, imported inside the page (passed in: the page resolves it, not tsc). */
const VERIFY_MODULE = '/web/verify.js';

if (!CHROMIUM && process.env.CI !== 'true') console.log(MISSING);
/** Skipped without a browser, except under CI=true, where the missing browser fails the test. */
const browserTest = CHROMIUM || process.env.CI === 'true' ? test.serial : test.skip;

let browser: Browser | undefined;
test.after.always(async () => {
  await browser?.close();
});

async function openPage(t: ExecutionContext): Promise<Page> {
  if (!CHROMIUM) throw new Error(MISSING);
  // --no-sandbox: CI runs as root in a container, where Chromium's sandbox cannot start.
  browser ??= await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 760 });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  pageErrors.set(page, errors);
  t.teardown(() => page.close());
  return page;
}

const pageErrors = new WeakMap<Page, string[]>();

/** Each test ends with this: an exception in the page (a CSP refusal included) fails it. */
const noPageErrors = (t: ExecutionContext, page: Page) => t.deepEqual(pageErrors.get(page), [], 'the page threw no error');

async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
  if (!SHOTS) return;
  await mkdir(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, name) as `${string}.png`, fullPage });
}

/** A net whose hub is LevelDB (the tamper test edits its bytes) and may be closed by the test first. */
async function levelNet(t: ExecutionContext): Promise<Net> {
  return startNet(t, {
    hub: async (dataDir, now) => {
      const hub = await startHub({ dataDir, port: 0, now });
      let closing: Promise<void> | undefined;
      return { ...hub, close: () => (closing ??= hub.close()) };
    },
  });
}

/** A provider node with a profile (the card's name and description) and its daemon running. */
async function provider(net: Net, dir: string, profile: { name: string; description: string }, caps: Parameters<typeof providerConfig>[0]) {
  const node = await net.node(dir, providerConfig(caps, 'closed'));
  await writeFile(join(node.dir, 'profile.json'), JSON.stringify(profile));
  const daemon = await net.start(node.dir);
  return { ...node, daemon };
}

async function search(page: Page, words: string): Promise<string[]> {
  await page.$eval('#q', (input) => {
    (input as HTMLInputElement).value = '';
  });
  await page.type('#q', words);
  await page.click('#search-form button');
  await page.waitForFunction(
    (q) => {
      const results = document.getElementById('results')!;
      return results.dataset.q === q && results.dataset.done === 'true';
    },
    {},
    words,
  );
  return page.$$eval('#result-list li', (items) => items.map((li) => li.getAttribute('data-aid')!));
}

async function verdict(page: Page): Promise<{ verdict: string; code: string | null }> {
  await page.waitForSelector('#verdict');
  return page.evaluate(() => ({
    verdict: document.getElementById('verdict')!.textContent!,
    code: document.getElementById('verdict-code')?.textContent ?? null,
  }));
}

const hubOrder = async (hub: Hub, q: string) =>
  ((await (await fetch(`${hub.url}/agents?q=${encodeURIComponent(q)}`)).json()) as { agents: { aid: string }[] }).agents.map((a) => a.aid);

browserTest(
  'Issue 22 item 4, PROTOCOL §8.4: the web view searches in the hub ranking, opens an agent with its skills and KEL, and the in-page check says verified',
  async (t) => {
    const page = await openPage(t); // first: without a browser under CI=true, fail before starting anything
    const net = await levelNet(t);
    const translator = await provider(net, 'translator', { name: 'Translator', description: 'Translates text between languages.' }, [
      { id: 'text.translate', description: 'Translates a text; it also summarizes it on request.' },
      { id: 'text.detect-language', description: 'Names the language of a text.' },
    ]);
    const summarizer = await provider(net, 'summarizer', { name: 'Summarizer', description: 'Summarises long documents.' }, [
      { id: 'text.summarize', description: 'Summarises any text; it can translate the summary into French.' },
    ]);
    await provider(net, 'resizer', { name: 'Resizer', description: 'Resizes images.' }, [{ id: 'image.resize' }]);
    // A rotation (PROTOCOL §2.4): the KEL the page checks has two events, the card is signed by key #1.
    await translator.daemon.close();
    const rotated = await runCli(['key', 'rotate', '--data', translator.dir]);
    t.is(rotated.code, 0, rotated.stderr);
    await net.start(translator.dir);

    const res = await page.goto(`${net.hub.url}/`);
    const csp = res!.headers()['content-security-policy'] ?? '';
    t.regex(csp, /script-src 'self'/, 'a strict policy: scripts from the hub only');
    t.notRegex(csp, /unsafe-inline|unsafe-eval/);

    const found = await search(page, 'translate');
    t.deepEqual(found, await hubOrder(net.hub, 'translate'), 'the order of the hub search route');
    t.deepEqual(found, [translator.aid, summarizer.aid], 'a skill id match before a description mention');
    t.deepEqual(await search(page, 'transl'), [translator.aid, summarizer.aid], 'a prefix matches');
    t.deepEqual(await search(page, 'translate'), [translator.aid, summarizer.aid]);
    await page.waitForSelector('#health-state');
    t.is(await page.$eval('#health-state', (e) => e.textContent), 'hub up', 'the hub health from /health');
    await screenshot(page, 'web-search.png');

    await page.click(`li[data-aid="${translator.aid}"] a.agent-link`);
    t.deepEqual(await verdict(page), { verdict: 'verified', code: null });
    const shown = await page.evaluate(() => ({
      name: document.getElementById('card-name')!.textContent,
      skills: [...document.querySelectorAll('#skills .skill')].map((s) => ({
        id: s.querySelector('.skill-id')!.textContent,
        description: s.querySelector('.skill-description')!.textContent,
      })),
      kel: [...document.querySelectorAll('#kel tbody tr')].map((r) => r.querySelector('td:nth-child(2)')!.textContent),
      charge: [...document.querySelectorAll('dt')].find((d) => d.textContent === 'charge')?.nextElementSibling?.textContent,
    }));
    t.is(shown.name, 'Translator');
    t.deepEqual(shown.skills, [
      { id: 'text.detect-language', description: 'Names the language of a text.' },
      { id: 'text.translate', description: 'Translates a text; it also summarizes it on request.' },
    ]);
    t.deepEqual(shown.kel, ['inception', 'rotation: key #1 replaces #0'], 'the KEL, event by event, with its rotation');
    t.regex(await page.$eval('#verdict-box', (e) => e.textContent!), /key #1, the current one/);
    t.is(shown.charge, 'free');
    await screenshot(page, 'web-agent-verified.png', true);
    noPageErrors(t, page);
  },
);

browserTest(
  'PROTOCOL §3.7: a card changed by one byte in the hub store shows "invalid" (INVALID_SIGNATURE), checked in the page',
  async (t) => {
    const page = await openPage(t); // first: without a browser under CI=true, fail before starting anything
    const net = await levelNet(t);
    const node = await provider(net, 'resizer', { name: 'Image resizer', description: 'Resizes images to thumbnails.' }, [
      { id: 'image.resize', description: 'Resizes an image to the size asked for.' },
    ]);
    // The daemon would publish its own card again when the hub comes back: it is stopped first.
    await node.daemon.close();
    const dataDir = join(net.root, 'hub');
    await net.hub.close();
    const store = await HubStore.open(dataDir);
    const rec = (await store.agent(node.aid))!;
    const tampered = rec.card!.replace('"Resizes images to thumbnails."', '"Resizes images to thumbnailz."');
    t.not(tampered, rec.card, 'one byte of the stored description changed');
    await store.agents.put(node.aid, { ...rec, card: tampered });
    await store.close();
    const hub = await startHub({ dataDir, port: 0, now: () => net.clock.now() });
    t.teardown(() => hub.close());
    t.is(await (await fetch(`${hub.url}/agents/${node.aid}/card`)).text(), tampered, 'the hub serves the changed card');

    await page.goto(`${hub.url}/`);
    t.deepEqual(await search(page, 'resizer'), [node.aid], 'still found: the hub does not check its own store');
    await page.click(`li[data-aid="${node.aid}"] a.agent-link`);
    t.deepEqual(await verdict(page), { verdict: 'invalid', code: 'INVALID_SIGNATURE' });
    t.deepEqual(await page.$$eval('#kel tbody tr', (rows) => rows.length), 1, 'the KEL itself still checks: the card is what was changed');
    await screenshot(page, 'web-agent-invalid.png', true);

    // The same page, the same card as signed: verified (so the check above can tell them apart).
    const good = await page.evaluate(
      async (card, aid, module) => {
        const { verifyCard } = await import(module);
        const kel = new Uint8Array(await (await fetch(`/agents/${aid}/kel`)).arrayBuffer());
        return verifyCard(card, kel).ok;
      },
      rec.card!,
      node.aid,
      VERIFY_MODULE,
    );
    t.true(good, 'the card as signed verifies in the page');
    noPageErrors(t, page);
  },
);

browserTest('Issue 22: card text is shown as text: a <script> in the name and an onerror image in a description never run', async (t) => {
  const page = await openPage(t); // first: without a browser under CI=true, fail before starting anything
  const net = await levelNet(t);
  const name = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">';
  const description = '<img src=x onerror="window.__pwned=3"> hostile card';
  const node = await provider(net, 'hostile', { name, description }, [
    { id: 'text.echo', description: '<script>window.__pwned=4</script>echoes' },
  ]);
  await page.goto(`${net.hub.url}/#/search?q=hostile`);
  await page.waitForSelector('#result-list li');
  t.is(await page.$eval('#result-list li a.agent-link', (a) => a.textContent), name, 'the name as text in the results');
  await page.click(`li[data-aid="${node.aid}"] a.agent-link`);
  t.deepEqual(await verdict(page), { verdict: 'verified', code: null });
  const seen = await page.evaluate(() => ({
    name: document.getElementById('card-name')!.textContent,
    description: document.getElementById('card-description')!.textContent,
    skill: document.querySelector('#skills .skill-description')!.textContent,
    injected: document.querySelectorAll('main script, main img').length,
    pwned: (window as any).__pwned ?? null,
  }));
  t.deepEqual(seen, { name, description, skill: '<script>window.__pwned=4</script>echoes', injected: 0, pwned: null });
  noPageErrors(t, page);
});

browserTest(
  "PROTOCOL §2.7: the page's KEL check gives the self-check AID, and refuses the KEL with one signature byte changed",
  async (t) => {
    const page = await openPage(t); // first: without a browser under CI=true, fail before starting anything
    const net = await levelNet(t);
    await page.goto(`${net.hub.url}/`);
    const seed = (label: string) => sha256(new TextEncoder().encode(label));
    const current = signerFromSeed(seed('anet-selfcheck/cur'));
    const next = signerFromSeed(seed('anet-selfcheck/nxt'));
    const kel = encodeKel([incept(current, next.publicKey, 0)]);
    const broken = Uint8Array.from(kel);
    broken[broken.length - 70]! ^= 1; // inside the 64-byte signature, before the event id
    const check = (bytes: Uint8Array) =>
      page.evaluate(
        async (hex, module) => {
          const { checkKel } = await import(module);
          const state = checkKel(Uint8Array.from(hex.match(/../g)!, (h: string) => parseInt(h, 16)));
          return (state.error ? state.error.code : state.aid) as string;
        },
        Buffer.from(bytes).toString('hex'),
        VERIFY_MODULE,
      );
    t.is(await check(kel), 'bafyreicwzc7gvyk53wlcsbafstihad7p7e7fs2hmor72si3a45l3mbcawq');
    t.is(await check(broken), 'BAD_SIGNATURE');
    noPageErrors(t, page);
  },
);
