// Small shared pieces of the console's pages: loading data, headings that take the focus when a
// page opens (a screen reader then announces it), live status lines, scrollable tables.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { isSignedOut, messageOf } from "./api";

/** Called when any call finds the session gone: main.tsx shows the sign-in form again. */
export let onSignedOut: () => void = () => undefined;
export function setOnSignedOut(f: () => void): void {
  onSignedOut = f;
}

/** Loads data when `key` changes; `reload` loads it again. */
export function useLoad<T>(load: () => Promise<T>, key: string) {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (e: unknown) => {
        if (isSignedOut(e)) onSignedOut();
        if (live) setState({ error: messageOf(e), loading: false });
      },
    );
    return () => {
      live = false;
    };
  }, [key, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** Runs an action, reporting its outcome in a status line; returns whether it succeeded. */
export function useAction() {
  const [status, setStatus] = useState<{ text: string; error: boolean }>();
  const run = useCallback(async (action: () => Promise<unknown>, done: string) => {
    try {
      await action();
      setStatus({ text: done, error: false });
      return true;
    } catch (e) {
      if (isSignedOut(e)) onSignedOut();
      setStatus({ text: messageOf(e), error: true });
      return false;
    }
  }, []);
  return { status, run };
}

/** The page's heading, focused when the page opens. */
export function PageHeading(props: { children: ComponentChildren }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <h2 tabIndex={-1} ref={ref}>
      {props.children}
    </h2>
  );
}

/** A status line screen readers announce when it changes. */
export function StatusLine(props: { status?: { text: string; error: boolean } }) {
  const s = props.status;
  return (
    <p role="status" class={s?.error ? "status error" : "status"}>
      {s ? (s.error ? `Error: ${s.text}` : s.text) : ""}
    </p>
  );
}

/** What a page shows while its data loads or when it failed. */
export function LoadState(props: { loading: boolean; error?: string }) {
  if (props.error)
    return (
      <p class="status error" role="alert">
        Error: {props.error}
      </p>
    );
  return props.loading ? <p aria-live="polite">Loading…</p> : null;
}

/** A table that scrolls sideways on a narrow screen, reachable by keyboard when it does. */
export function TableWrap(props: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={props.label} tabIndex={0}>
      {props.children}
    </div>
  );
}

/** Unix seconds as a UTC date and time; "" for 0. */
export function when(unix: bigint | number): string {
  const n = Number(unix);
  if (n === 0) return "";
  return new Date(n * 1000)
    .toISOString()
    .replace("T", " ")
    .replace(/\.000Z$/, " UTC");
}
