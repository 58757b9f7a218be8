// fuzz_request.c: libFuzzer target for OpenAI request parsing (src/server/openai.c). Any byte
// string is a request body for both routes; oai_parse must return 0 or -1 with a 400 error object,
// and a request it accepts must hold values inside the documented ranges.
//   clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc tests/fuzz/fuzz_request.c
//       src/server/openai.c src/sampler.c src/common.c -ljansson -lm
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "server/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct oai_limits lim;
    oai_limits_default(&lim, 4096);
    for (int kind = OAI_CHAT; kind <= OAI_COMPLETION; kind++) {
        struct oai_request r;
        struct oai_error e;
        memset(&e, 0, sizeof e);
        if (oai_parse(kind, (const char *)data, size, &lim, &r, &e)) {
            CHECK(e.status == 400 && e.message[0]);
            char *body = oai_error_body(&e); // must be encodable whatever the input was
            CHECK(body != NULL);
            free(body);
            continue;
        }
        CHECK(json_is_object(r.root));
        CHECK(r.sp.temperature >= 0 && r.sp.temperature <= 2);
        CHECK(r.sp.top_p > 0 && r.sp.top_p <= 1);
        CHECK(r.sp.min_p >= 0 && r.sp.min_p <= 1);
        CHECK(r.sp.repetition_penalty > 0);
        CHECK(r.max_tokens == -1 || (r.max_tokens >= 1 && r.max_tokens <= (1 << 30)));
        CHECK(r.top_logprobs >= 0 && r.top_logprobs <= 20);
        CHECK(r.n_stop >= 0 && r.n_stop <= lim.max_stop);
        for (int i = 0; i < r.n_stop; i++) CHECK(strlen(r.stop[i]) > 0);
        for (int i = 0; i < r.sp.n_bias; i++)
            CHECK(r.sp.bias[i].id >= 0 && r.sp.bias[i].id < lim.n_vocab);
        if (kind == OAI_CHAT) {
            json_t *m = json_object_get(r.root, "messages");
            CHECK(json_is_array(m) && json_array_size(m) > 0);
        } else {
            CHECK(r.prompt || r.n_prompt_ids > 0);
            for (int i = 0; i < r.n_prompt_ids; i++)
                CHECK(r.prompt_ids[i] >= 0 && r.prompt_ids[i] < lim.n_vocab);
        }
        oai_request_free(&r);
    }
    return 0;
}
