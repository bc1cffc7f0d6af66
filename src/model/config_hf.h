// config_hf.h — reading a Hugging Face config.json into struct model_config (config_hf.c).
#ifndef OCTET_CONFIG_HF_H
#define OCTET_CONFIG_HF_H

#include <jansson.h>

#include "config.h"

// Fills c from cfg (all but n_vocab, which the embedding's rows give). Every key that changes
// the math is applied or refused; err_msg() names the key. `where` prefixes messages.
int config_from_hf(struct model_config *c, const json_t *cfg, const char *where);

#endif
