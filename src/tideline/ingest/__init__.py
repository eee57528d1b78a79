"""Importers: raw conversation turns from JSONL chats and agent transcripts."""
