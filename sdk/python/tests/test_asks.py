"""Asking: a sandbox whose policy says [network] unknown = "ask" holds a
name no entry names while a callback decides it; with nobody listening it
refuses at once."""

import threading
import time

import capsem


def resolves(sb, name):
    return sb.exec(["getent", "hosts", name]).exit_code == 0


def test_on_ask(env, tmp_path):
    pol = tmp_path / "policy.toml"
    pol.write_text('[network]\nallow = []\nunknown = "ask"\nask_timeout = 30\n')
    sb = capsem.Sandbox.start("sdk-ask", policy=str(pol), workspace=env["workspace"], data=env["data"],
                              ca_dir=env["ca_dir"], capsem=env["capsem"])
    try:
        t0 = time.monotonic()
        assert not resolves(sb, "yes.example"), "nobody listens: refused"
        assert time.monotonic() - t0 < 5, "nobody listens: refused at once, not held"

        seen = []

        def decide(q):
            seen.append((q["kind"], q["name"], q["entry"]))
            return {"yes.example": "once", "kept.example": "session"}.get(q["name"], "deny")

        with sb.on_ask(decide) as h:
            assert resolves(sb, "yes.example")
            assert not resolves(sb, "no.example")
            assert resolves(sb, "kept.example")
            assert resolves(sb, "kept.example")  # a session answer: not asked again
            assert sb.asks() == []
        assert h.errors == []
        assert seen == [("network", "yes.example", "yes.example"), ("network", "no.example", "no.example"),
                        ("network", "kept.example", "kept.example")]
        time.sleep(3.5)  # an answer covers the name's other lookups (A after AAAA) for 3 s: netstack's lookupWindow
        assert not resolves(sb, "yes.example"), "once was once; nobody listens now"
        assert resolves(sb, "kept.example"), "the session's answer outlives the listener"

        # The stream, by hand: the question, then answer it.
        stream = sb.asks(follow=True)
        assert next(stream) == {"type": "listening"}  # the sandbox asks from now on
        r = {}
        t = threading.Thread(target=lambda: r.update(ok=resolves(sb, "hand.example")))
        t.start()
        for u in stream:
            if u["type"] == "asked":
                sb.answer(u["question"]["id"], "deny")
                break
        t.join(60)
        stream.close()
        assert r == {"ok": False}
    finally:
        sb.rm(force=True)
