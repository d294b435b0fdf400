# llmapi helpers.py
