from ctxbudget import Packer

packer = Packer()  # the shipped policies; default@1
docs = ["API keys expire after 90 days.", {"text": "Rotate keys with `keys rotate`.", "score": 0.8}]
pack = packer.pack("How long do API keys stay valid?", docs, input_limit=4096)
print(pack.rendered, pack.evidence_tokens, sep="\n")
