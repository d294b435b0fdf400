# llmapi model.py from TRT-LLM
