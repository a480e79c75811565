"""Signed webhooks over HTTP (`pip install 'walletcore[webhooks]'`, docs/events.md,
"Webhooks"): the `WebhookSender` that signs each message with `standardwebhooks` (one
signature per live secret) and posts it with httpx, to an address it resolved and checked
itself (entry point `walletcore.webhook_senders: httpx`)."""
