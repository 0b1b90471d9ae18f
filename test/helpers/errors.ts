/** The `code` of the error of class `type` that `fn` throws, or `accepted` when it throws nothing. */
export function codeOf(fn: () => unknown, type: abstract new (...args: never[]) => Error & { code: string }): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof type) return err.code;
    throw err;
  }
  return 'accepted';
}

/** `codeOf` for a function that returns a promise. */
export async function codeOfAsync(
  fn: () => Promise<unknown>,
  type: abstract new (...args: never[]) => Error & { code: string },
): Promise<string> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof type) return err.code;
    throw err;
  }
  return 'accepted';
}
