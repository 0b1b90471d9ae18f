/** Polls `check` every 20 ms, `tries` times at most; throws naming `what` if it never holds. */
export async function until(check: () => boolean | Promise<boolean>, what: string, tries = 100): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  if (!(await check())) throw new Error(`timed out waiting for ${what}`);
}
