/*
 * crc32c.h - CRC-32C (Castagnoli, the iSCSI / ext4 / SSE4.2 polynomial
 * 0x1EDC6F41, reflected), the checksum of spool files. Any thread.
 *
 * perf__crc32c uses the SSE4.2 crc32 instruction when the CPU has it (checked
 * once with cpuid) and a table-driven slicing-by-8 otherwise; both give the
 * same values. Chaining works: perf__crc32c(perf__crc32c(0, a), b) is the CRC
 * of a followed by b. Known value: "123456789" -> 0xE3069283.
 */
#ifndef PERF_CRC32C_H
#define PERF_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CRC of data[0..len) continued from `crc` (0 to start). */
uint32_t perf__crc32c(uint32_t crc, const void *data, size_t len);

/* The table-driven implementation, whatever the CPU (for tests). */
uint32_t perf__crc32c_sw(uint32_t crc, const void *data, size_t len);

/* True when perf__crc32c uses the SSE4.2 instruction. */
bool perf__crc32c_hw(void);

#endif
