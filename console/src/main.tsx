// The operator console: sign-in, then one page per task, chosen by the address's #fragment (the
// server serves one page; a reload keeps the page and, through the cookie, the session).
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { resumeSession, signIn, signOut } from "./api";
import { setOnSignedOut } from "./ui";
import { Overview } from "./pages/overview";
import { Messages } from "./pages/messages";
import { MessagePage } from "./pages/message";
import { Addresses } from "./pages/addresses";
import { SenderIds } from "./pages/sender-ids";
import { Numbers } from "./pages/numbers";
import { Accounts } from "./pages/accounts";
import { Carriers } from "./pages/carriers";
import { Usage } from "./pages/usage";
import { Smpp } from "./pages/smpp";
import "uplot/dist/uPlot.min.css";
import "./style.css";

const PAGES = [
  { path: "overview", title: "Overview" },
  { path: "messages", title: "Messages" },
  { path: "addresses", title: "Addresses" },
  { path: "sender-ids", title: "Sender IDs" },
  { path: "numbers", title: "Numbers" },
  { path: "accounts", title: "Accounts" },
  { path: "usage", title: "Usage" },
  { path: "carriers", title: "Carriers and routes" },
  { path: "smpp", title: "SMPP" },
] as const;

function useHash(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [parts, setParts] = useState(read);
  useEffect(() => {
    const on = () => setParts(read());
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return parts;
}

function SignIn(props: { onSignedIn: () => void }) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const input = (e.currentTarget as HTMLFormElement).elements.namedItem("token") as HTMLInputElement;
    setBusy(true);
    const refused = await signIn(input.value).catch((err: unknown) => String(err));
    setBusy(false);
    if (refused) {
      setError(refused);
      input.focus();
    } else props.onSignedIn();
  };
  return (
    <main id="main" class="sign-in">
      <h1>Switchboard console</h1>
      <form onSubmit={submit} aria-describedby="sign-in-help">
        <h2>Sign in</h2>
        <p id="sign-in-help">Sign in with the operator token (SWITCHBOARD_ADMIN_TOKEN).</p>
        <label for="token">Operator token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required aria-invalid={error ? "true" : undefined} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" class="status error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

function Page(props: { parts: string[] }) {
  const [page, arg] = props.parts;
  switch (page) {
    case "messages":
      return arg ? <MessagePage sid={arg} /> : <Messages />;
    case "addresses":
      return <Addresses />;
    case "sender-ids":
      return <SenderIds />;
    case "numbers":
      return <Numbers />;
    case "accounts":
      return <Accounts selected={arg} />;
    case "usage":
      return <Usage accountSid={arg} />;
    case "carriers":
      return <Carriers />;
    case "smpp":
      return <Smpp />;
    default:
      return <Overview />;
  }
}

function App() {
  const [signedIn, setSignedIn] = useState<boolean | undefined>(undefined);
  const parts = useHash();
  useEffect(() => {
    setOnSignedOut(() => setSignedIn(false));
    void resumeSession().then(setSignedIn, () => setSignedIn(false));
  }, []);
  if (signedIn === undefined) return <p aria-live="polite">Loading…</p>;
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const current = parts[0] ?? "overview";
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById("main")?.focus())}>
        Skip to content
      </a>
      <header>
        <h1>Switchboard console</h1>
        <nav aria-label="Console pages">
          <ul>
            {PAGES.map((p) => (
              <li key={p.path}>
                <a href={`#/${p.path}`} aria-current={current === p.path ? "page" : undefined}>
                  {p.title}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button type="button" class="sign-out" onClick={() => void signOut().finally(() => setSignedIn(false))}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Page parts={parts} key={parts.join("/")} />
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
