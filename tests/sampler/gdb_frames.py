# gdb_frames.py - run by gdb (-x) attached to a process, for test_names.
# Every thread's frames as gdb's `bt` shows them, one line each:
#   @thread <lwp>
#   @frame <level> <normal|inline|tailcall|other> <pc hex> <file or -> <line> <name or ??>
# The name is last (it may hold spaces); file is gdb's symtab file name.
#
# With GDB_FRAMES_PCS naming a file of addresses (hex, one a line), the
# frames gdb gives each address instead, as `bt` would show a frame whose
# pc is there (a caller's frame is asked at its return address - 1, as gdb
# looks it up):
#   @pc <address hex>
#   @frame ... (the functions inlined at the address, innermost first, then
#   the function the code belongs to)
#   @start <hex>  (where that last function starts; absent for ??)
# The chain is the blocks around the address (gdb.block_for_pc), as gdb's
# inline frames are made: each function block up to the outermost one,
# the innermost with the line of the address, each outer one with the line
# of its call of the function inside it (an inlined function's symbol line
# is its DW_AT_call_line, as gdb's find_frame_sal reads it). An address no
# debug information covers is named as `bt` names such a frame: by the
# minimal symbol around it (`info symbol`), else ??.
import os

import gdb

KINDS = {gdb.NORMAL_FRAME: "normal", gdb.INLINE_FRAME: "inline", gdb.TAILCALL_FRAME: "tailcall"}


def threads():
    for thread in gdb.selected_inferior().threads():
        thread.switch()
        print("@thread %d" % thread.ptid[1])
        frame = gdb.newest_frame()
        level = 0
        while frame is not None:
            sal = frame.find_sal()
            filename = sal.symtab.filename if sal and sal.symtab else "-"
            print("@frame %d %s %x %s %d %s" % (level, KINDS.get(frame.type(), "other"), frame.pc(),
                                               filename, sal.line if sal else 0,
                                               frame.name() or "??"))
            level += 1
            try:
                frame = frame.older()
            except gdb.error:
                frame = None


def minimal_symbol(pc):
    """The name and start of the minimal symbol around pc, or ("??", None)."""
    text = gdb.execute("info symbol 0x%x" % pc, to_string=True)
    if " in section " not in text:
        return "??", None
    name = text.split(" in section ")[0]
    plus = name.rfind(" + ")
    if plus > 0:
        return name[:plus], pc - int(name[plus + 3:])
    return name, pc


def function_blocks(pc):
    try:
        block = gdb.block_for_pc(pc)
    except RuntimeError:
        block = None
    chain = []
    while block is not None and not block.is_global and not block.is_static:
        if block.function is not None:
            chain.append(block.function)
        block = block.superblock
    return chain


def address(pc):
    print("@pc %x" % pc)
    chain = function_blocks(pc)
    if not chain:
        name, start = minimal_symbol(pc)
        print("@frame 0 normal %x - 0 %s" % (pc, name))
        if start is not None:
            print("@start %x" % start)
        return
    sal = gdb.find_pc_line(pc)
    for level, function in enumerate(chain):
        if level == 0:
            filename = sal.symtab.filename if sal.symtab else "-"
            line = sal.line
        else:
            inner = chain[level - 1]
            filename = inner.symtab.filename if inner.symtab else "-"
            line = inner.line
        kind = "inline" if level + 1 < len(chain) else "normal"
        print("@frame %d %s %x %s %d %s" % (level, kind, pc, filename, line, function.print_name))
    print("@start %x" % int(chain[-1].value().address))


pcs = os.environ.get("GDB_FRAMES_PCS")
if pcs:
    with open(pcs) as f:
        for word in f.read().split():
            address(int(word, 16))
else:
    threads()
