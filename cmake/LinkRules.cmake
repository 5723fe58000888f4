# The dependency rules of docs/architecture.md, checked when CMake
# configures: a target named here must not reach (directly or through any
# library it links) the libraries listed. A broken rule stops the
# configure step with the chain that breaks it.

# Appends to `out_var` every target and library `target` links, recursively.
function(_flotilla_link_closure target out_var)
  set(seen ${${out_var}})
  set(stack ${target})
  while(stack)
    list(POP_BACK stack item)
    # $<LINK_ONLY:x> (private deps of static libraries) is still linked.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item IN_LIST seen OR item MATCHES "^\\$<")
      continue()
    endif()
    list(APPEND seen ${item})
    if(TARGET ${item})
      get_target_property(type ${item} TYPE)
      set(deps)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(direct ${item} LINK_LIBRARIES)
        if(direct)
          list(APPEND deps ${direct})
        endif()
      endif()
      get_target_property(iface ${item} INTERFACE_LINK_LIBRARIES)
      if(iface)
        list(APPEND deps ${iface})
      endif()
      list(APPEND stack ${deps})
    endif()
  endwhile()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# flotilla_forbid_links(TARGET FORBIDDEN... ): FATAL_ERROR when TARGET's
# link closure holds a library whose name matches one of the FORBIDDEN
# regular expressions.
function(flotilla_forbid_links target)
  if(NOT TARGET ${target})
    return()
  endif()
  set(closure)
  _flotilla_link_closure(${target} closure)
  foreach(pattern ${ARGN})
    foreach(lib ${closure})
      if(lib MATCHES "${pattern}")
        message(FATAL_ERROR
          "link rule broken: ${target} links ${lib} (matches ${pattern}); "
          "see docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()
