"""Clients of OpenAI-compatible model providers: the chat client and the reasoning-trace split."""
